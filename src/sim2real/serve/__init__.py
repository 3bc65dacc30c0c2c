"""The dashboard: serves the report pages and a JSON API for a team, reading only.

FastAPI and uvicorn come with the ``serve`` extra (``pip install 'sim2real[serve]'``);
import :func:`sim2real.serve.app.create_app` to build the app.
"""

__all__: list[str] = []
