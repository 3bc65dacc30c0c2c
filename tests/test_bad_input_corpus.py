"""The bad-input corpus: a small valid fleet with one defect per case, through the CLI.

Every case is generated from the same small synthetic world (``small_fleet``)
and run through ``sim2real analyze`` (or ``validate``) in this process. Each asserts its
exit code, a message naming the file, column or row, that no traceback escaped, and that
an input error writes nothing.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from sim2real.cli import main
from sim2real.dataset import load_dataset

Mutation = Callable[[Path], None]


@pytest.fixture(scope="module")
def base(small_fleet: Path) -> Path:
    """The valid fleet every case starts from: 97 real episodes (24 failures), 60 sim."""
    return small_fleet


# --- editing a copy of the base dataset ----------------------------------------------------

def _part(root: Path) -> Path:
    return next((root / "signals").glob("*.parquet"))


def _edit_episodes(edit: Callable[[pa.Table], pa.Table]) -> Mutation:
    def mutate(root: Path) -> None:
        path = root / "episodes.parquet"
        pq.write_table(edit(pq.read_table(path)), path)
    return mutate


def _edit_signals(edit: Callable[[pa.Table], pa.Table]) -> Mutation:
    def mutate(root: Path) -> None:
        path = _part(root)
        pq.write_table(edit(pq.read_table(path)), path)
    return mutate


def _set(table: pa.Table, column: str, row: int, value: object) -> pa.Table:
    values = table[column].to_pylist()
    values[row] = value
    i = table.column_names.index(column)
    return table.set_column(i, column, pa.array(values, table.schema.field(i).type))


def _rows_of(table: pa.Table, source: str | None = None, outcome: str | None = None) -> list[int]:
    mask = np.ones(table.num_rows, bool)
    if source:
        mask &= np.array(table["source"].to_pylist()) == source
    if outcome:
        mask &= np.array(table["outcome"].to_pylist(), dtype=object) == outcome
    return np.flatnonzero(mask).tolist()


def _keep_episodes(keep: Callable[[pa.Table], pa.Array]) -> Mutation:
    """Keep only some episodes, in both tables, so the rest stays consistent."""
    def mutate(root: Path) -> None:
        episodes = pq.read_table(root / "episodes.parquet")
        kept = episodes.filter(keep(episodes))
        pq.write_table(kept, root / "episodes.parquet")
        signals = pq.read_table(_part(root))
        pq.write_table(signals.filter(pc.is_in(signals["episode_id"], kept["episode_id"])),
                       _part(root))
    return mutate


def _first_failure(root: Path) -> str:
    episodes = pq.read_table(root / "episodes.parquet")
    return str(episodes["episode_id"][_rows_of(episodes, "real", "failure")[0]])


def _drop_samples_of_first_failure(root: Path) -> None:
    victim = _first_failure(root)
    signals = pq.read_table(_part(root))
    pq.write_table(signals.filter(pc.not_equal(signals["episode_id"], victim)), _part(root))


def _write_bytes(name: str, data: bytes) -> Mutation:
    def mutate(root: Path) -> None:
        (root / name).write_bytes(data)
    return mutate


def _truncate_part(root: Path) -> None:
    data = _part(root).read_bytes()
    _part(root).write_bytes(data[: len(data) // 2])


def _corrupt_page(column: str) -> Mutation:
    """Flip bytes inside one column chunk's data: the page checksum no longer matches."""
    def mutate(root: Path) -> None:
        path = _part(root)
        meta = pq.read_metadata(path)
        group = meta.row_group(0)
        chunk = next(group.column(j) for j in range(group.num_columns)
                     if group.column(j).path_in_schema == column)
        data = bytearray(path.read_bytes())
        middle = chunk.data_page_offset + chunk.total_compressed_size // 2
        for k in range(8):
            data[middle + k] ^= 0xFF
        path.write_bytes(bytes(data))
    return mutate


def _one_sample_each(table: pa.Table) -> pa.Table:
    ids = np.array(table["episode_id"].to_pylist())
    first = np.concatenate([[True], ids[1:] != ids[:-1]])
    return table.filter(pa.array(first))


def _stretch_one_sim_rollout(seconds: float) -> Mutation:
    """One sim rollout keeps recording, at its own rate, for ``seconds``."""
    def mutate(root: Path) -> None:
        signals = pq.read_table(_part(root))
        ids = np.array(signals["episode_id"].to_pylist())
        victim = next(i for i in dict.fromkeys(ids) if i.startswith("sim-"))
        rows = signals.filter(pa.array(ids == victim))
        t = rows["t"].to_numpy()
        dt = float(np.median(np.diff(t)))
        n = int(seconds / dt)
        long = rows.take(pa.array(np.arange(n) % rows.num_rows))
        long = long.set_column(1, "t", pa.array(np.arange(n) * dt))
        rest = signals.filter(pa.array(ids != victim))
        pq.write_table(pa.concat_tables([rest, long]).sort_by([("episode_id", "ascending"),
                                                                ("t", "ascending")]),
                       _part(root))
    return mutate


def _as_text(table: pa.Table) -> pa.Table:
    return table.set_column(1, "t", pc.cast(table["t"], pa.string()))


def _rename(old: str, new: str) -> Callable[[pa.Table], pa.Table]:
    return lambda table: table.rename_columns([new if c == old else c
                                               for c in table.column_names])


def _float64(table: pa.Table, column: str) -> pa.Table:
    i = table.column_names.index(column)
    return table.set_column(i, column, table[column].cast(pa.float64()))


def _duplicate(column: str, alias: str) -> Callable[[pa.Table], pa.Table]:
    return lambda table: table.append_column(alias, table[column])


# --- the cases -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    """One defect, and what the CLI must answer: its exit code and a message that names
    where the problem is (a regular expression)."""

    mutate: Mutation
    code: int
    message: str
    args: tuple[str, ...] = ()


FAILS = "episodes.parquet, column 'episode_id'"

CASES: dict[str, Case] = {
    # episodes
    "duplicate episode_id": Case(_edit_episodes(lambda e: _set(e, "episode_id", 5,
                                                                e["episode_id"][4].as_py())),
                                 2, r"episodes\.parquet, column 'episode_id', row 5: duplicate"),
    "episodes empty": Case(_edit_episodes(lambda e: e.slice(0, 0)), 2,
                           r"episodes\.parquet: holds no episodes"),
    "episodes zero bytes": Case(_write_bytes("episodes.parquet", b""), 2,
                                r"episodes\.parquet: cannot be read"),
    "episodes column twice": Case(_edit_episodes(_duplicate("task", "task")), 2,
                                  r"episodes\.parquet, column 'task': column appears twice"),
    "blank task": Case(_edit_episodes(lambda e: _set(e, "task", 6, " ")), 2,
                       r"episodes\.parquet, column 'task', row 6: must not be empty"),
    "unknown source": Case(_edit_episodes(lambda e: _set(e, "source", 3, "simulation")), 2,
                           r"column 'source', row 3: unknown value 'simulation'"),
    "no sim episodes": Case(_keep_episodes(lambda e: pc.equal(e["source"], "real")), 2,
                            r"column 'source': no sim episodes"),
    "no real episodes": Case(_keep_episodes(lambda e: pc.equal(e["source"], "sim")), 2,
                             r"column 'source': no real episodes"),
    "failure without samples": Case(_drop_samples_of_first_failure, 2,
                                    FAILS + r", row 0: 1 real failure\(s\) cannot be compared: "
                                    r"'real-000000' \(row 0\): no samples"),
    "failure_time beyond its samples": Case(
        _edit_episodes(lambda e: _set(e, "failure_time", 0, 1000.0)), 2,
        FAILS + r", row 0: .*failure_time 1000 s outside its samples"),
    "failure_time 1e308": Case(_edit_episodes(lambda e: _set(e, "failure_time", 0, 1e308)), 2,
                               FAILS + r", row 0: .*failure_time 1e\+308 s outside"),
    "failure_time inf": Case(_edit_episodes(lambda e: _set(e, "failure_time", 0, float("inf"))),
                             2, r"episodes\.parquet, column 'failure_time', row 0: must be a "
                             r"finite number"),
    "param inf": Case(_edit_episodes(lambda e: _set(e, "param.friction", _rows_of(e, "sim")[0],
                                                    float("inf"))), 2,
                      r"column 'param\.friction', row 97: value inf is beyond the float32"),
    "param 1e308": Case(_edit_episodes(lambda e: _set(e, "param.object_mass",
                                                      _rows_of(e, "sim")[1], 1e308)), 2,
                        r"column 'param\.object_mass', row 98: value 1e\+308 is beyond"),
    "ctx number 1e308": Case(_edit_episodes(lambda e: _set(e, "ctx.light_request", 2, -1e308)),
                             2, r"column 'ctx\.light_request', row 2: value -1e\+308 is beyond"),
    # signals
    "t as text": Case(_edit_signals(lambda s: _set(_as_text(s), "t", 7, "0.1s")), 2,
                      r"part-00000\.parquet, column 't', row 7: cannot read '0\.1s'"),
    "t not finite": Case(_edit_signals(lambda s: _set(s, "t", 9, float("nan"))), 2,
                         r"part-00000\.parquet, column 't', row 9: must be a finite number"),
    "t not increasing": Case(_edit_signals(lambda s: _set(s, "t", 2, 0.0)), 2,
                             r"part-00000\.parquet, column 't', row 2: t must be strictly"),
    "t in epoch seconds": Case(
        _edit_signals(lambda s: s.set_column(1, "t", pc.add(s["t"], pc.multiply(
            pc.cast(pc.equal(s["episode_id"], "real-000003"), pa.float64()), 1.7e9)))), 2,
        r"part-00000\.parquet, column 't', row \d+: episode 'real-000003' starts at "
        r"t = 1\.7e\+09 s"),
    "t column twice": Case(_edit_signals(_duplicate("t", "t")), 2,
                           r"part-00000\.parquet, column 't': column appears twice"),
    "channel named alike": Case(_edit_signals(_duplicate("grip_force", "grip_force ")), 2,
                                r"column 'grip_force ': column is named alike 'grip_force'"),
    "t named T": Case(_edit_signals(_rename("t", "T")), 2,
                      r"column 't': required column is missing \(found 'T'\)"),
    "part truncated": Case(_truncate_part, 2, r"part-00000\.parquet: cannot be read"),
    "part zero bytes": Case(_write_bytes("signals/part-00000.parquet", b""), 2,
                            r"part-00000\.parquet: cannot be read"),
    "corrupt page of t": Case(_corrupt_page("t"), 2,
                              r"part-00000\.parquet: cannot be read.*CRC"),
    "corrupt page of a channel": Case(_corrupt_page("grip_force"), 2,
                                      r"part-00000\.parquet: .*cannot be read.*CRC"),
    "unknown episode in signals": Case(_edit_signals(lambda s: _set(s, "episode_id", 4, "x")),
                                       2, r"column 'episode_id', row 4: no such episode"),
    "text channel": Case(_edit_signals(lambda s: s.append_column(
        "note", pa.array(["a"] * s.num_rows))), 2, r"column 'note': channel must be numeric"),
    "value 1e308": Case(_edit_signals(lambda s: _set(_float64(s, "grip_force"), "grip_force",
                                                     11, 1e308)), 2,
                        r"column 'grip_force', row 11: value 1e\+308 is beyond the float32"),
    "value inf": Case(_edit_signals(lambda s: _set(s, "det_conf", 12, float("inf"))), 2,
                      r"column 'det_conf', row 12: value inf is beyond"),
    "one sample per episode": Case(_edit_signals(_one_sample_each), 2,
                                   FAILS + r", row 0: 2[34] real failure\(s\).*one sample only"),
    "signals empty": Case(_edit_signals(lambda s: s.slice(0, 0)), 2,
                          FAILS + r", row 0: 24 real failure\(s\) cannot be compared: "
                          r"'real-000000' \(row 0\): no samples"),
    "no channels": Case(_edit_signals(lambda s: s.select(["episode_id", "t"])), 2,
                        r"no channel columns besides episode_id and t"),
    "no signals": Case(lambda root: shutil.rmtree(root / "signals"), 2,
                       r"missing; expected one of signals\.parquet, signals\.csv"),
    "episodes in two formats": Case(_write_bytes("episodes.csv", b"episode_id,source,task\n"),
                                    2, r"fleet: holds both episodes\.parquet and episodes\.csv; "
                                    r"keep one"),
    "signals in two layouts": Case(_write_bytes("signals.csv", b"episode_id,t,x\n"), 2,
                                   r"fleet: holds both signals/ and signals\.csv; keep one"),
    # side files
    "unknown family": Case(_write_bytes("channels.csv", b"channel,family\ngrip_force,haptic\n"),
                           2, r"channels\.csv, column 'family', row 0: unknown family"),
    "channels.csv not text": Case(_write_bytes("channels.csv", bytes(range(256))), 2,
                                  r"channels\.csv: cannot be read"),
    "params.csv not a number": Case(_write_bytes("params.csv", b"param,low,high\nfriction,a,1\n"),
                                    2, r"params\.csv, row 0: not a number"),
    # options
    "previous not json": Case(_write_bytes("old.json", b"{not json"), 2,
                              r"--previous .*old\.json: not a valid ReportModel",
                              ("--previous", "{root}/old.json")),
    "previous random bytes": Case(_write_bytes("old.json", bytes(range(256))), 2,
                                  r"--previous .*old\.json: not a valid ReportModel",
                                  ("--previous", "{root}/old.json")),
    "previous folder without report": Case(lambda root: (root / "old").mkdir(), 2,
                                           r"--previous .*report\.json: no such file",
                                           ("--previous", "{root}/old")),
    "out under a file": Case(_write_bytes("notes.txt", b"x"), 2,
                             r"output folder .*notes\.txt/out is under the file",
                             ("-o", "{root}/notes.txt/out")),
    "out is someone's folder": Case(_write_bytes("notes.txt", b"x"), 2,
                                    r"output folder .* holds files sim2real did not write "
                                    r"\(channels\.csv, episodes\.parquet, notes\.txt, \.\.\.\)",
                                    ("-o", "{root}")),
}


def _run(root: Path, out: Path, args: tuple[str, ...]) -> tuple[int, str, BaseException | None]:
    given = [a.format(root=root) for a in args]
    if "-o" not in given:
        given += ["-o", str(out)]
    result = CliRunner().invoke(main, ["analyze", str(root), "--quiet", *given])
    return result.exit_code, result.output, result.exception


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_defect_exits_with_its_code_and_names_where(base: Path, tmp_path: Path,
                                                         name: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    case = CASES[name]
    root = tmp_path / "fleet"
    shutil.copytree(base, root)
    case.mutate(root)
    if name.startswith("out"):  # checked before any work: the analysis never starts
        monkeypatch.setattr("sim2real.api.diagnose", _never)
    out = tmp_path / "out"
    code, output, exception = _run(root, out, case.args)
    assert isinstance(exception, SystemExit), output  # no traceback
    assert code == case.code, output
    assert output.startswith("error: ") and output.count("\n") == 1, output  # one line
    assert _matches(case.message, output), output
    assert not out.exists()


def _never(*_args: object, **_kwargs: object) -> None:
    raise AssertionError("the analysis started before the options were checked")


def _matches(pattern: str, text: str) -> bool:
    import re

    return re.search(pattern, text) is not None


# --- the cases handled by design ---------------------------------------------------------

def _analyze(base: Path, tmp_path: Path, mutate: Mutation,
             *args: str) -> tuple[dict[str, object], Path]:
    root = tmp_path / "fleet"
    shutil.copytree(base, root)
    mutate(root)
    out = tmp_path / "out"
    code, output, exception = _run(root, out, args)
    assert code == 0 and exception is None, output
    return json.loads((out / "report.json").read_text()), root


def test_no_failures_is_a_valid_empty_report(base: Path, tmp_path: Path) -> None:
    def all_succeed(root: Path) -> None:
        episodes = pq.read_table(root / "episodes.parquet")
        real = pc.equal(episodes["source"], "real")
        outcome = pc.if_else(real, "success", episodes["outcome"])
        episodes = episodes.set_column(episodes.column_names.index("outcome"), "outcome", outcome)
        pq.write_table(episodes, root / "episodes.parquet")

    report, _ = _analyze(base, tmp_path, all_succeed)
    assert report["events"] == [] and report["clusters"] == []
    assert report["dataset"]["failures"] == 0 and report["dataset"]["episodes_real"] == 97
    assert "no real failures: nothing to cluster" in report["warnings"]
    assert (tmp_path / "out" / "report.html").stat().st_size > 0


def test_failures_only_leaves_out_what_sim_lacks(base: Path, tmp_path: Path) -> None:
    only_failures = _keep_episodes(lambda e: pc.invert(pc.and_(
        pc.equal(e["source"], "real"), pc.equal(e["outcome"], "success"))))
    report, _ = _analyze(base, tmp_path, only_failures)
    assert len(report["events"]) == 24
    assert any("left out (no real successes" in w and "loop_latency_ms" in w
               for w in report["warnings"])


def test_skip_bad_episodes_lists_and_leaves_them_out(base: Path, tmp_path: Path) -> None:
    report, _ = _analyze(base, tmp_path, _drop_samples_of_first_failure,
                            "--skip-bad-episodes")
    victim = "real-000000"
    assert victim not in {e["episode_id"] for e in report["events"]}
    assert len(report["events"]) == 23
    assert any("left out (--skip-bad-episodes)" in w and victim in w
               for w in report["warnings"])


def _move_to_task(task: str, failures: int, sims: int) -> Mutation:
    """The first ``failures`` real failures and ``sims`` sim rollouts become ``task``."""
    def retask(episodes: pa.Table) -> pa.Table:
        tasks = episodes["task"].to_pylist()
        for r in (_rows_of(episodes, "real", "failure")[:failures]
                  + _rows_of(episodes, "sim")[:sims]):
            tasks[r] = task
        return episodes.set_column(episodes.column_names.index("task"), "task",
                                   pa.array(tasks))
    return _edit_episodes(retask)


@pytest.mark.parametrize(("sims", "warned"), [
    (20, "3 real failure(s) of a task with no real success ('other' (3)): loop_latency_ms"),
    (0, "3 real failure(s) of a task sim never ran ('other' (3)): no nearest sim rollouts"),
])
def test_failures_of_a_task_without_successes_or_sim(base: Path, tmp_path: Path, sims: int,
                                                     warned: str) -> None:
    """A task whose real episodes all failed (a traceback before), or that sim never ran:
    analysed, and said."""
    report, _ = _analyze(base, tmp_path, _move_to_task("other", 3, sims))
    assert any(w.startswith(warned) for w in report["warnings"]), report["warnings"]
    moved = [e for e in report["events"] if e["task"] == "other"]
    assert len(moved) == 3 and len(report["events"]) == 24
    assert all(np.isfinite(e["drift_score"]) and e["drift_score"] >= 0 for e in moved)
    assert all(bool(e["nearest_sim"]) == (sims > 0) for e in moved)


def test_t_written_as_numbers_in_text_is_read(base: Path, tmp_path: Path) -> None:
    report, _ = _analyze(base, tmp_path, _edit_signals(_as_text))
    assert len(report["events"]) == 24 and report["clusters"]


def test_a_runaway_rollout_never_sizes_the_grid(base: Path, tmp_path: Path) -> None:
    report, root = _analyze(base, tmp_path, _stretch_one_sim_rollout(3600.0))
    warning = next(w for w in report["warnings"] if "longer than 10 x the median" in w)
    assert "'sim-000000'" in warning
    ds = load_dataset(root)
    assert ds.span < 100 and max(ds.durations.values()) == ds.span
    assert all(e["drift_score"] >= 0 for e in report["events"])


def test_a_far_last_sample_is_warned_and_bounded(base: Path, tmp_path: Path) -> None:
    """t = 1e308 on a rollout's last sample: finite, so compared over the span (warned)."""
    root = tmp_path / "fleet"
    shutil.copytree(base, root)

    def far_last(table: pa.Table) -> pa.Table:
        ids = table["episode_id"].to_pylist()
        last = max(i for i, e in enumerate(ids) if e == "sim-000000")
        return _set(table, "t", last, 1e308)

    _edit_signals(far_last)(root)
    ds = load_dataset(root)
    assert ds.span < 100 and ds.durations["sim-000000"] == ds.span
    assert any("'sim-000000' (1e+308 s)" in w for w in ds.warnings)


def test_ctrl_c_while_analysing_prints_one_line(base: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(*_args: object, **_kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("sim2real.api.diagnose", interrupted)
    code, output, _ = _run(base, tmp_path / "out", ())
    assert code == 130 and output == "interrupted\n"
    assert not (tmp_path / "out").exists()


def test_validate_with_unreadable_previous_exits_2(base: Path, tmp_path: Path) -> None:
    (tmp_path / "old.json").write_text("[]")
    out = tmp_path / "v"
    result = CliRunner().invoke(main, ["validate", str(base), "--baseline", "w01,w02",
                                       "--candidate", "w03", "-o", str(out), "--quiet",
                                       "--previous", str(tmp_path / "old.json")])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit)
    assert "--previous" in result.output and "old.json" in result.output
    assert not out.exists()
