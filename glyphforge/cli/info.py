"""``glyphforge info``: the data dir, the cache, what is prepared and built, and how data would be fetched."""
from __future__ import annotations

import argparse
from typing import Any

from glyphforge.cache.entry import Entry
from glyphforge.cli.common import add_command, add_fetch_arguments, data_context, name_width, store_refusals
from glyphforge.datasets import registry
from glyphforge.datasets.own_copies import note as own_copy_note
from glyphforge.textfmt import count, describe_params, human_size
from glyphforge.urls import redacted


def _info(args: argparse.Namespace) -> int:
    context = data_context(args, remote=True)
    store = context.entry_store
    with store_refusals():
        entries = store.ls()
    print(f"data dir:   {context.remote or context.data_dir}")
    print(f"cache:      {store.where} ({count(len(entries), 'entry', 'entries')}, "
          f"{human_size(sum(e.size_bytes for e in entries))})")
    if context.remote is not None:
        print(f"local copy: {context.data_dir} (entries fetched from the URL, and what is made on this machine)")
    print(f"mirrors:    {redacted(' '.join(context.mirrors)) or '(none; give --mirror or set $GLYPHFORGE_MIRROR)'}")
    print(f"offline:    {'yes' if context.offline else 'no'}")
    print(f"verify:     {'yes' if context.verify else 'no (--no-verify)'}")
    print("datasets:")
    datasets = registry.registered()
    for dataset in datasets:
        prepared = sorted({_described(e) + own_copy_note(e.meta) for e in entries if e.kind == dataset})
        print(f"  {dataset:{name_width()}s} "
              f"{'; '.join(prepared) if prepared else 'not prepared (prepare-data ' + dataset + ')'}")
    built = sorted({e.kind for e in entries} - set(datasets))
    print("built:" if built else "built:      nothing yet (glyphforge build scenes --help)")
    for kind in built:
        of_kind = [e for e in entries if e.kind == kind]
        newest, own = of_kind[-1], [note for note in (own_copy_note(e.meta) for e in of_kind) if note]  # by creation
        size = human_size(sum(e.size_bytes for e in of_kind)) + "".join(f", {len(own)} of them{n}" for n in own[:1])
        print(f"  {kind:{name_width()}s} {count(len(of_kind), 'entry', 'entries')}, {size}; "
              f"newest {newest.key[:12]} ({newest.meta.get('n_examples', '?')} examples){own_copy_note(newest.meta)}")
    return 0


def _described(entry: Entry) -> str:
    """What a dataset's entry holds, in one line: its parameters but its sources, else (they are all it has, as for
    backgrounds) its label and its number of images."""
    images = entry.meta.get("n_images")
    return describe_params(_without_sources(entry.params)) or (
        registry.entry_label(entry) + (f" ({count(images, 'image')})" if isinstance(images, int) else ""))


def _without_sources(params: dict[str, Any]) -> dict[str, Any]:
    """A dataset entry's parameters without the upstream hash or commit and the entry layout (the same for every
    entry)."""
    return {name: value for name, value in params.items() if name not in ("source", "commit", "layout")}


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Add info to ``glyphforge``'s sub-commands ``commands``."""
    info = add_command(commands, "info", "show the data dir, the cache, what is prepared, and the mirrors and offline "
                       "mode a command given the same arguments uses", "glyphforge info --mirror file:///shared/mirror",
                       _info)
    add_fetch_arguments(info)
