"""``/docs``: the API described for people, drawn from the app's OpenAPI document.

FastAPI's own page loads Swagger UI from a CDN; this one is rendered here, offline, with
every route, its parameters and the fields of what it returns.
"""

from __future__ import annotations

from typing import Any

import jinja2

__all__ = ["render_api_docs"]

_PAGE = jinja2.Template("""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{ info.title }} · API</title>
<style>
body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;
color:#1d2430}
code{font:13px ui-monospace,monospace;background:#eef1f5;padding:0 .25rem;border-radius:3px}
h2{margin-top:2rem;border-bottom:1px solid #d8dde5}
table{border-collapse:collapse;margin:.5rem 0}td,th{padding:.2rem .6rem;text-align:left;
vertical-align:top;border-bottom:1px solid #eef1f5}.get{color:#0b6e4f;font-weight:600}
.muted{color:#667}
</style></head><body>
<h1>{{ info.title }} <small class="muted">{{ info.version }}</small></h1>
<p>{{ info.description }} Every route answers JSON; the machine-readable description is
<a href="/openapi.json"><code>/openapi.json</code></a>. <a href="/">All runs</a></p>
<h2>Routes</h2>
{% for path, methods in paths.items() %}{% for method, op in methods.items() %}
<h3><span class="{{ method }}">{{ method|upper }}</span> <code>{{ path }}</code></h3>
<p>{{ op.summary }}</p>
{% if op.parameters %}<table><tr><th>parameter</th><th>in</th><th>meaning</th></tr>
{% for p in op.parameters %}<tr><td><code>{{ p.name }}</code>{% if p.required %} (required)
{% endif %}</td><td>{{ p["in"] }}</td><td>{{ p.description or "" }}</td></tr>{% endfor %}
</table>{% endif %}
<p class="muted">Returns: {{ returns(op) }}</p>
{% endfor %}{% endfor %}
<h2>What the routes return</h2>
{% for name, schema in schemas.items() %}
<h3 id="{{ name }}"><code>{{ name }}</code></h3>
{% if schema.properties %}<table>
{% for field, spec in schema.properties.items() %}<tr><td><code>{{ field }}</code></td>
<td>{{ kind(spec) }}</td><td>{{ spec.description or "" }}</td></tr>{% endfor %}
</table>{% endif %}
{% endfor %}
</body></html>
""", autoescape=True)


def render_api_docs(spec: dict[str, Any]) -> str:
    """The API reference page for an OpenAPI document."""
    return _PAGE.render(info=spec.get("info", {}), paths=spec.get("paths", {}),
                        schemas=spec.get("components", {}).get("schemas", {}),
                        kind=_kind, returns=_returns)


def _kind(spec: dict[str, Any]) -> str:
    """A schema in a few words: ``string``, ``list of ClusterReport``, ``number or null``."""
    if "$ref" in spec:
        return str(spec["$ref"]).rsplit("/", 1)[-1]
    if "anyOf" in spec:
        return " or ".join(_kind(s) for s in spec["anyOf"])
    if spec.get("type") == "array":
        return "list of " + _kind(spec.get("items", {}))
    if spec.get("type") == "object" and "additionalProperties" in spec:
        return "map to " + _kind(spec["additionalProperties"]) \
            if isinstance(spec["additionalProperties"], dict) else "object"
    if "enum" in spec:
        return " | ".join(map(str, spec["enum"]))
    return str(spec.get("type", "any"))


def _returns(op: dict[str, Any]) -> str:
    ok = op.get("responses", {}).get("200", {})
    schema = ok.get("content", {}).get("application/json", {}).get("schema", {})
    return _kind(schema) if schema else "JSON"
