"""Per-class datasets: one cache entry per (config, shape), one uint8 file per class; a dataset is a declaration.

EMNIST, MNIST, Fashion-MNIST and KMNIST have one form: upstream files holding test and
train images of a few classes. Each is a declaration
(:class:`glyphforge.datasets.classes.declaration.Declaration`: name, title, pinned
resources, configs with their classes and counts, a reader, the class file names, the
default resize); everything else is written once, for every declaration: prepare and the
cache params (:mod:`glyphforge.datasets.classes.prepare`: fetch the resources with
:func:`glyphforge.datasets.prepare_steps.upstream_file`, read them with the declaration's
reader, write the native entry, write resized entries), the entry of a load (get, or
prepare when the context allows), load (which images: the selection,
:mod:`glyphforge.datasets.classes.selection`), the map-style dataset, preview and the glyphs
scenes draw (:mod:`glyphforge.datasets.classes.load`); the argument checks are
:mod:`glyphforge.datasets.classes.args`. A shipped dataset's module writes its public
functions (``load_mnist``...: typed, each calling the machinery with its declaration, documented by
:func:`documented`), or takes another dataset's as they are (:func:`like`: ``load_kmnist`` is ``load_mnist``
bound to KMNIST's declaration); this module binds those of a declaration made at run time (:func:`bind`) into
its registry record (:func:`record`). A new dataset of this form shipped with glyphforge is one declaration
(``declare``), its public functions and one registry line (`glyphforge.datasets.registry.declared`).

Cache entries
-------------
One entry per ``(config, shape)``, of kind the dataset's name, with the params
``{config_option: config}`` (only for datasets with several configs, e.g. EMNIST's
``"split"``), ``"shape"`` and ``"source"`` (the pinned hash of the only resource, or
``{file name: hash}`` of several; an own copy used with ``verify=False`` has the
``sha256:`` of each of its files that is not upstream's, see
:mod:`glyphforge.datasets.own_copies`), ``"layout": 2`` (:data:`~glyphforge.datasets.classes.prepare.LAYOUT`)
and, for any shape but the native one, ``"resize": <default resize>``. The native entry is
converted from the upstream files; any other shape is the resize (Pillow's, exactly) of every
image of the native entry.
An entry holds one ``.pklz`` per class (named by the declaration's ``class_file``): the
uint8 array ``(n_images_of_class, H, W)``, upright, white on black, that class's *test*
images first, then its *train* images, each in file order; ``upstream_labels.pklz`` holds the
class index of every upstream test example, then of every train example, in file order (what
puts the map-style datasets in upstream order). ``entry.meta`` holds
``dataset``, the config option's value (``split`` for EMNIST), ``shape``, ``n_images``,
``n_train``, ``n_test``, ``verified`` (False when made from files used unchecked,
``verify=False``) and ``classes``: one record per class in label order, ``{"name",
"label", "file", "n_test", "n_train"}``; the first ``n_test`` images of a class file are
its test images. Resized entries add ``resized_from`` (the native entry's key) and
``resize``.
"""
from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from glyphforge.datasets.classes.args import config_keyword, config_signature, public_doc
from glyphforge.datasets.classes.declaration import DECLARATIONS, Declaration
from glyphforge.datasets.classes.load import load, preview
from glyphforge.datasets.classes.prepare import prepare

F = TypeVar("F", bound=Callable[..., Any])
#: The public functions `documented` made: ``{function: (the machinery it calls, its dataset's name)}``.
_DOCUMENTED: dict[Callable[..., Any], tuple[Callable[..., Any], str]] = {}


def record(dataset: Declaration, summary: str) -> Any:
    """Return the registry record of ``dataset`` declared at run time (a `~glyphforge.datasets.registry.DatasetRecord`).

    Its parts are bound here; everything else (the glyphs scenes draw, the command-line
    options) is read from the declaration by the layers above.
    """
    from glyphforge.datasets.classes import declaration as _class_declaration
    from glyphforge.datasets.registry import DatasetRecord

    return DatasetRecord(
        name=dataset.name, summary=summary, prepare=bind(prepare, dataset.name, f"prepare_{dataset.ident}"),
        load=bind(load, dataset.name, f"load_{dataset.ident}"), preview=preview,
        default_resize=dataset.default_resize, resources=functools.partial(dict, dataset.resources),
        declared_in=_class_declaration.__name__,
    )


# -- the public names of a declared dataset ------------------------------------------------------
def documented(function: Callable[..., Any], name: str) -> Callable[[F], F]:
    """Decorate the public function of the declared dataset ``name`` that calls ``function`` with the declaration
    (``load_emnist`` calls `load`): its docstring becomes its own first line, then the rest of ``function``'s,
    less the declaration and with the config called as the dataset calls it (see `public_doc`)."""

    def decorate(public: F) -> F:
        public.__doc__ = public_doc(public.__doc__ or "", function, DECLARATIONS[name])
        _DOCUMENTED[public] = (function, name)
        return public

    return decorate


def like(public: F, name: str, module: str) -> F:
    """Return the public function of the declared dataset ``name`` that ``public`` (another dataset's, `documented`)
    is for its own: the machinery ``public`` calls, bound to ``name``'s declaration (`bind`), in ``module``.

    Its name and docstring are ``public``'s with the other dataset's ident and title made ``name``'s
    (``load_mnist``: "Load MNIST images..." gives ``load_kmnist``: "Load KMNIST images..."), and type
    checkers see ``public``'s signature, which it has (the two datasets have the same configs).
    """
    function, other = _DOCUMENTED[public]
    theirs, mine = DECLARATIONS[other], DECLARATIONS[name]
    made = bind(function, name, public.__name__.replace(theirs.ident, mine.ident), module)
    summary = (inspect.getdoc(public) or "").partition("\n")[0].replace(theirs.title, mine.title, 1)
    made.__doc__ = public_doc(summary, function, mine)
    delattr(made, "__wrapped__")  # its own public function: its reference shows its signature
    return made  # type: ignore[return-value]  # public's signature (see above)


def bind(function: Callable[..., Any], name: str, public: str, module: str = __name__) -> Callable[..., Any]:
    """Return ``function`` with its first argument, the declaration ``name``, fixed: the public function ``public``
    of a dataset declared at run time (`record`; the datasets glyphforge ships write theirs, see `documented`).

    The declaration is looked up in :data:`DECLARATIONS` on each call. Its ``config``
    keyword is called by the declaration's ``config_option`` (EMNIST: ``split``), or
    dropped for a dataset with one config. The signature and docstring shown by
    ``help()`` are the bound ones.
    """
    option = DECLARATIONS[name].config_option

    signature = config_signature(inspect.signature(function), option, drop=1)

    def bound(*args: Any, **kwargs: Any) -> Any:
        signature.bind(*args, **kwargs)  # a keyword it does not take (config, for one config) is a TypeError
        return function(DECLARATIONS[name], *args, **config_keyword(kwargs, option))

    bound.__signature__ = signature  # type: ignore[attr-defined]  # read by help()
    bound.__name__ = bound.__qualname__ = public
    bound.__wrapped__ = function  # type: ignore[attr-defined]  # the function it binds (help() shows the signature above)
    bound.__module__ = module
    bound.__doc__ = public_doc(f"{DECLARATIONS[name].title}: {inspect.getdoc(function)}".partition("\n")[0],
                               function, DECLARATIONS[name])
    return bound
