"""The MuJoCo cell: the MJCF beside this module, the object catalogue, the parameters.

One compiled model per object type is cached per process; a rollout copies nothing but
writes its parameter values (pad friction, object mass) into that model before it starts,
so every episode sees exactly the values it was given.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

import mujoco
import numpy as np

from sim2real.dataset.schema import ParamRange

__all__ = [
    "BIN_CENTER",
    "BIN_HALF",
    "CATALOGUE",
    "HEAD_HOME_Z",
    "NOVEL_OBJECTS",
    "PAD_BELOW_HEAD",
    "PARAM_RANGES",
    "TIMESTEP",
    "TRAINING_OBJECTS",
    "ObjectSpec",
    "Shape",
    "apply_params",
    "load_model",
]

_MJCF = Path(__file__).with_name("cell.xml")
TIMESTEP = 0.004
HEAD_HOME_Z = 0.25  # world z of the head body at joint z = 0
PAD_BELOW_HEAD = 0.09  # pad centres hang this far below the head body
BIN_CENTER = (0.36, 0.0)
BIN_HALF = 0.085  # inner half-width of the bin

Shape = Literal["box", "cylinder", "sphere"]


@dataclass(frozen=True)
class ObjectSpec:
    """One catalogue item: MuJoCo half-sizes (box: x, y, z; cylinder: r, h/2; sphere: r)."""

    name: str
    shape: Shape
    size: tuple[float, ...]
    mass: float

    @property
    def half_height(self) -> float:
        """Height of the object's centre above the table when it stands upright."""
        return self.size[-1] if self.shape != "sphere" else self.size[0]

    @property
    def half_width(self) -> float:
        """Half its extent across the gripper's closing axis."""
        return self.size[1] if self.shape == "box" else self.size[0]


_OBJECTS = (
    ObjectSpec("box_s", "box", (0.02, 0.02, 0.02), 0.10),
    ObjectSpec("box_m", "box", (0.025, 0.025, 0.03), 0.25),
    ObjectSpec("box_l", "box", (0.03, 0.03, 0.035), 0.45),
    ObjectSpec("cyl_s", "cylinder", (0.02, 0.03), 0.12),
    ObjectSpec("cyl_m", "cylinder", (0.028, 0.04), 0.30),
    ObjectSpec("sphere_s", "sphere", (0.022,), 0.08),
    ObjectSpec("sphere_m", "sphere", (0.03,), 0.20),
    # Never in the training catalogue: a tall, thin, full bottle (task-scope overflow).
    ObjectSpec("bottle", "cylinder", (0.016, 0.08), 0.3),
)
CATALOGUE: dict[str, ObjectSpec] = {o.name: o for o in _OBJECTS}
NOVEL_OBJECTS = ("bottle",)
TRAINING_OBJECTS = tuple(o.name for o in _OBJECTS if o.name not in NOVEL_OBJECTS)

# The domain-randomisation ranges of the simulation rollouts.
PARAM_RANGES: dict[str, ParamRange] = {
    p.name: p
    for p in (
        ParamRange("friction", 0.55, 1.3, 0.9),
        ParamRange("object_mass_scale", 0.7, 1.4, 1.0),
        ParamRange("actuator_latency_ms", 10.0, 70.0, 30.0),
        ParamRange("light_level", 0.55, 1.4, 1.0),
        ParamRange("camera_noise", 0.5, 1.6, 1.0),
    )
}

_GEOM_TYPES = {
    "box": mujoco.mjtGeom.mjGEOM_BOX,
    "cylinder": mujoco.mjtGeom.mjGEOM_CYLINDER,
    "sphere": mujoco.mjtGeom.mjGEOM_SPHERE,
}


@cache
def load_model(object_type: str) -> mujoco.MjModel:
    """The cell with ``object_type`` as its free object, compiled once per process.

    Raises:
        KeyError: the object type is not in the catalogue.
    """
    obj = CATALOGUE[object_type]
    spec = mujoco.MjSpec.from_file(str(_MJCF))
    body = spec.worldbody.add_body(name="obj", pos=[0.0, 0.0, obj.half_height])
    body.add_freejoint(name="obj")
    body.add_geom(
        name="obj",
        type=_GEOM_TYPES[obj.shape],
        size=list(obj.size) + [0.0] * (3 - len(obj.size)),
        mass=obj.mass,
        rgba=[0.85, 0.3, 0.2, 1.0],
    )
    return spec.compile()


def apply_params(model: mujoco.MjModel, object_type: str, params: Mapping[str, float]) -> None:
    """Write the physical parameters of one rollout into ``model`` (in place).

    ``friction`` is the pads' sliding friction (pads have contact priority, so it alone
    decides pad-object contacts); ``object_mass_scale`` scales mass and inertia together,
    which keeps the object's shape-consistent inertia.
    """
    nominal = {k: p.nominal for k, p in PARAM_RANGES.items()}
    values = {**nominal, **params}
    for pad in ("pad_l", "pad_r"):
        gid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, pad)
        model.geom_friction[gid, 0] = values["friction"]
    bid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "obj")
    # Absolute values from the compiled originals, never relative to the model's current
    # ones: rounding would otherwise accumulate and make a result depend on which episodes
    # ran before it in the same process.
    mass, inertia = _object_inertia(object_type)
    scale = values["object_mass_scale"]
    model.body_mass[bid] = mass * scale
    model.body_inertia[bid] = inertia * scale


@cache
def _object_inertia(object_type: str) -> tuple[float, np.ndarray]:
    """The object's mass and principal inertia as compiled (mass scale 1)."""
    model = load_model.__wrapped__(object_type)  # a fresh compile, never a modified model
    bid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "obj")
    return float(model.body_mass[bid]), np.array(model.body_inertia[bid])
