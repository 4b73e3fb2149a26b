"""The argument checks of per-class datasets (:mod:`glyphforge.datasets.classes.files`): configs, subsets, classes."""
from __future__ import annotations

import inspect
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from glyphforge.datasets.classes.declaration import Declaration

SUBSETS = ("all", "train", "test")


def config_phrase(dataset: Declaration, config: str) -> str:
    """How messages name ``config`` of ``dataset``: its title, then the config when it has several."""
    return dataset.title if dataset.config_option is None else f"{dataset.title} {config}"


def check_config(dataset: Declaration, config: Any) -> str:
    """Return ``config`` (None: the default) if ``dataset`` has it, else raise a ValueError listing them."""
    if config is None:
        return dataset.config
    if config not in dataset.configs:
        raise ValueError(f"unknown {dataset.title} {dataset.config_option} {config!r}: use one of "
                         f"{', '.join(dataset.configs)}")
    return str(config)


def check_configs(dataset: Declaration, config: str | Iterable[str] | None) -> tuple[str, ...]:
    """Return the configs ``config`` names (one name, an iterable of names, None: the default), repeats dropped."""
    names = (dataset.config,) if config is None else (config,) if isinstance(config, str) else tuple(
        dict.fromkeys(config))
    if not names:
        raise ValueError(f"{dataset.config_option} is empty: give one or more of {', '.join(dataset.configs)}, or "
                         f"None for {dataset.config}")
    return tuple(check_config(dataset, name) for name in names)


def check_subset(subset: Any) -> str:
    """Return ``subset`` if it is one of :data:`SUBSETS`, else raise a ValueError listing them."""
    if subset not in SUBSETS:
        raise ValueError(f"subset {subset!r} is invalid: use one of {', '.join(SUBSETS)}")
    return str(subset)


def check_classes(dataset: Declaration, config: str, classes: Iterable[str | int] | str | None) -> list[str]:
    """Return the distinct class names of ``classes`` (None: every class of ``config``) in label order, or raise.

    Label order is the dataset's own (upstream's): Fashion-MNIST's ``T-shirt/top`` first.

    A string is one class name, but where every class name is one character (EMNIST,
    MNIST) it is split into characters: ``"0123"``. Integers are taken as their digits.
    """
    known = dataset.configs[config].classes
    if classes is None:
        return list(known)
    single = all(len(name) == 1 for name in known)
    if isinstance(classes, str):
        names = list(classes) if single else [classes]
    else:
        names = [str(item) for item in classes]
    unknown = sorted({name for name in names if name not in known})
    if unknown:
        listed = repr("".join(known)) if single else ", ".join(map(repr, known))
        whose = "its classes are" if dataset.config_option is None else f"this {dataset.config_option} has the classes"
        raise ValueError(f"unknown {config_phrase(dataset, config)} classes {unknown}: {whose} {listed}")
    if not names:
        raise ValueError("classes is empty: give at least one class, or None for all")
    wanted = set(names)
    return [name for name in known if name in wanted]


def class_names(dataset: Declaration, config: str | None = None) -> list[str]:
    """Return the class names of ``config`` (None: the default) in label order (no download needed)."""
    return list(dataset.configs[check_config(dataset, config)].classes)


def config_signature(signature: inspect.Signature, option: str | None, drop: int = 0) -> inspect.Signature:
    """``signature`` without its first ``drop`` parameters, its ``config`` parameter called ``option`` (EMNIST:
    ``split``), or dropped when ``option`` is None (a dataset of one config): the signature ``help()`` shows."""
    parameters = []
    for parameter in list(signature.parameters.values())[drop:]:
        if parameter.name == "config":
            if option is None:
                continue
            parameter = parameter.replace(name=option)
        parameters.append(parameter)
    return signature.replace(parameters=parameters)


def config_keyword(options: dict[str, Any], option: str | None) -> dict[str, Any]:
    """Return ``options`` with the keyword ``option`` (EMNIST: ``split``) renamed ``config``."""
    if option is not None and option in options:
        options["config"] = options.pop(option)
    return options


def public_doc(summary: str, function: Any, dataset: Declaration) -> str:
    """The docstring of ``dataset``'s public function calling ``function`` with the declaration: ``summary``, then
    ``function``'s docstring after its first line, less its ``dataset`` parameter and with its ``config`` parameter
    called by the declaration's name for it (EMNIST: ``split``), or dropped for a dataset of one config."""
    body = inspect.getdoc(function).partition("\n")[2]  # type: ignore[union-attr]  # the machinery is documented
    body = re.sub(r"^dataset\n(?:    .*\n)+", "", body, flags=re.MULTILINE)
    option = dataset.config_option
    body = re.sub(r"^config\n((?:    .*\n)+)", "" if option is None else rf"{option}\n\1", body, flags=re.MULTILINE)
    return f"{summary}\n{body}"
