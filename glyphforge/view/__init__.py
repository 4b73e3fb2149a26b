"""``glyphforge view``: a local web viewer of a data dir's prepared and built datasets (read only).

`sources` reads the datasets at random (a page reads its rows only; filters read the small label
arrays once), `targets` turns an example's targets into what the page draws, `app` is the
Starlette app (JSON and PNG made per request, the page's static files), `server` listens and runs
it with uvicorn. Needs the ``view`` extra (``pip install glyphforge[view]``).
"""
