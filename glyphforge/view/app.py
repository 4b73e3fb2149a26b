"""The viewer's web app (Starlette): the page's static files and a JSON and PNG API over a `Catalog`.

Routes (``KEY``: a cache key; every answer a 4xx names what was wrong, as ``{"error": ...}``):

=====================================  ==========================================================
``/``, ``/static/...``                 the page: HTML, JS and CSS shipped in the package
``/api/datasets``                      the data dir's datasets (prepared and built entries)
``/api/datasets/KEY/rows``             a page of rows: ``page``, ``size`` (1-100), filters ``class``, ``objects``
``/api/datasets/KEY/image/I.png``      example ``I``'s image (``frame``: a video's frame), a PNG made now
``/api/datasets/KEY/mask/I.png``       its instance masks, coloured by object, transparent elsewhere
``/api/datasets/KEY/example/I``        example ``I`` in full: its targets, array by array
``/api/datasets/KEY/stats``            examples per class, objects per scene, and the manifest's record
=====================================  ==========================================================
"""
from __future__ import annotations

import functools
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from glyphforge.view.catalog import Catalog
from glyphforge.view.sources import Source, ViewRequestError
from glyphforge.view.targets import caption, image_size, objects, table

#: The page's files, shipped in the package (package data).
STATIC = Path(__file__).parent / "static"
#: The most rows a page may hold.
MAX_PAGE_SIZE = 100
#: Host names a loopback server answers to (others are refused: a page elsewhere cannot reach it by DNS rebinding).
LOOPBACK_NAMES = ["127.0.0.1", "localhost", "::1", "[::1]"]
#: Colours of the instance masks, by object slot (RGB), repeated beyond.
PALETTE = np.array([[230, 25, 75], [60, 180, 75], [255, 225, 25], [0, 130, 200], [245, 130, 48], [145, 30, 180],
                    [70, 240, 240], [240, 50, 230], [210, 245, 60], [250, 190, 212]], dtype=np.uint8)

Handler = Callable[..., Response]


def answers(handler: Handler) -> Handler:
    """Run ``handler``; a refusal becomes its 4xx and any other failure a 500, each one message, never a traceback."""
    @functools.wraps(handler)
    def answer(request: Request) -> Response:
        try:
            return handler(request)
        except ViewRequestError as error:
            return JSONResponse({"error": str(error)}, status_code=error.status)
        except Exception as error:  # a dataset that cannot be read: said, the server goes on
            return JSONResponse({"error": f"{type(error).__name__}: {error}"}, status_code=500)
    return answer


def create_app(catalog: Catalog, *, loopback: bool = True) -> Starlette:
    """The viewer's app over ``catalog``; ``loopback``: answer only requests addressed to this machine's loopback."""
    def source(request: Request) -> Source:
        return catalog.source(request.path_params["key"])

    @answers
    def datasets(request: Request) -> Response:
        where = catalog.context.remote or catalog.context.data_dir
        return JSONResponse({"data_dir": str(where), "datasets": catalog.listing()})

    @answers
    def rows(request: Request) -> Response:
        dataset = source(request)
        size = _integer(request, "size", 48, 1, MAX_PAGE_SIZE)
        page = _integer(request, "page", 0, 0, None)
        index = dataset.label_index()
        objects_filter = _integer(request, "objects", None, 0, None)
        matching = index.matching(dataset.class_index(request.query_params.get("class")), objects_filter)
        pages = max(1, -(-len(matching) // size))
        if page >= pages:
            raise ViewRequestError(f"page {page} is past the last page ({pages - 1}) of {len(matching)} examples at "
                                   f"{size} a page")
        chosen = matching[page * size:(page + 1) * size]
        names = dataset.classes
        return JSONResponse({
            "total": len(matching), "page": page, "pages": pages, "size": size,
            "rows": [{"index": int(i), "caption": caption(index, int(i), names), "frames": dataset.n_frames,
                      "shape": image_size(row, dataset.n_frames),
                      "masks": "masks" in row, "objects": objects(row, dataset.n_frames, names)}
                     for i, row in zip(chosen.tolist(), dataset.rows(chosen), strict=True)],
        })

    @answers
    def image(request: Request) -> Response:
        dataset, row, frame = _frame_request(request, source(request))
        return _png(row["images"][frame] if dataset.n_frames else row["images"])

    @answers
    def mask(request: Request) -> Response:
        dataset, row, frame = _frame_request(request, source(request))
        if "masks" not in row:
            raise ViewRequestError(f"{dataset.title} has no instance masks (a scene spec makes them with masks=True)",
                                   404)
        slots = row["masks"][frame] if dataset.n_frames else row["masks"]
        coloured = np.zeros((*slots.shape, 4), dtype=np.uint8)
        shown = slots > 0
        coloured[shown, :3] = PALETTE[(slots[shown].astype(np.int64) - 1) % len(PALETTE)]
        coloured[shown, 3] = 140
        return _png(coloured)

    @answers
    def example(request: Request) -> Response:
        dataset = source(request)
        index = _path_index(request)
        row = dataset.row(index)
        return JSONResponse({"index": index, "caption": caption(dataset.label_index(), index, dataset.classes),
                             "frames": dataset.n_frames, "masks": "masks" in row,
                             "objects": objects(row, dataset.n_frames, dataset.classes),
                             "table": table(row, dataset.classes)})

    @answers
    def stats(request: Request) -> Response:
        dataset = source(request)
        index = dataset.label_index()
        labels = index.labels[index.labels >= 0]
        per_class = np.bincount(labels, minlength=len(dataset.classes)).tolist() if len(labels) else []
        answer: dict[str, Any] = {
            "title": dataset.title, "info": dataset.info(),
            "per_class": {"what": "objects per class" if dataset.is_scenes else "examples per class",
                          "names": dataset.classes, "counts": per_class},
        }
        if index.n_objects is not None:
            counts = np.bincount(index.n_objects)
            answer["per_scene"] = {"what": "scenes by number of objects", "names": [str(n) for n in range(len(counts))],
                                   "counts": counts.tolist()}
        if index.scene_label is not None:
            counts = np.bincount(index.scene_label[index.scene_label >= 0])
            answer["scene_labels"] = {"what": "scenes by scene label", "names": [str(n) for n in range(len(counts))],
                                      "counts": counts.tolist()}
        return JSONResponse(answer)

    def page(request: Request) -> Response:
        return FileResponse(STATIC / "index.html")

    async def refused(request: Request, error: Exception) -> Response:
        status = error.status_code if isinstance(error, HTTPException) else 500
        what = "no such page" if status == 404 else "refused"
        return JSONResponse({"error": f"{what}: {request.url.path[:200]}"}, status_code=status)

    key = "/api/datasets/{key}"
    routes = [
        Route("/", page), Route("/api/datasets", datasets), Route(f"{key}/rows", rows),
        Route(f"{key}/image/{{index}}.png", image), Route(f"{key}/mask/{{index}}.png", mask),
        Route(f"{key}/example/{{index}}", example), Route(f"{key}/stats", stats),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    middleware = [Middleware(TrustedHostMiddleware, allowed_hosts=LOOPBACK_NAMES)] if loopback else []
    return Starlette(routes=routes, middleware=middleware, exception_handlers={HTTPException: refused})


def _integer(request: Request, name: str, default: int | None, low: int, high: int | None) -> Any:
    """Query parameter ``name`` as an int in ``[low, high]`` (None: no upper bound); missing: ``default``."""
    text = request.query_params.get(name)
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise ViewRequestError(f"{name} must be a whole number, got {text[:40]!r}") from None
    if value < low or (high is not None and value > high):
        bound = f"from {low} to {high}" if high is not None else f"{low} or more"
        raise ViewRequestError(f"{name} must be {bound}, got {value}")
    return value


def _path_index(request: Request) -> int:
    """The example index of the path, a whole number."""
    text = request.path_params["index"]
    if not text.isdigit():
        raise ViewRequestError(f"an example index is a whole number 0 or more, got {text[:40]!r}", 404)
    return int(text)


def _frame_request(request: Request, dataset: Source) -> tuple[Source, dict[str, np.ndarray], int]:
    """The dataset, the example's row and the frame a PNG request asks for (``frame``: 0 to T - 1, videos only)."""
    row = dataset.row(_path_index(request))
    last = max(dataset.n_frames - 1, 0)
    frame = _integer(request, "frame", 0, 0, last)
    return dataset, row, frame


def _png(array: np.ndarray) -> Response:
    """``array`` (H, W), (H, W, 3) or (H, W, 4) uint8 as a PNG (fast compression: it is made per request)."""
    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(array)).save(buffer, "PNG", compress_level=1)
    return Response(buffer.getvalue(), media_type="image/png", headers={"Cache-Control": "max-age=3600"})
