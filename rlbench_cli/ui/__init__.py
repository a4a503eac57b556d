"""``rlbench ui``: a local web app over the results store (Starlette + uvicorn, uPlot vendored in
``static/``). ``data`` reads (one short read-only connection per request), ``curves`` computes grouped curves
with bootstrap bands, ``app`` routes, ``server`` checks the options and serves."""
