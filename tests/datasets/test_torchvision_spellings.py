"""torchvision's spellings of the map-style datasets mean what they mean in torchvision.

``MNIST(root, train=True, download=True, transform=..., target_transform=...)`` (and
``FashionMNIST``, ``KMNIST``, ``EMNIST(root, split, train=...)``, ``Omniglot(root,
background=True)``): ``root`` is the data dir, ``train`` the train/test subset, ``download=False``
never downloads. The proof is pytorch/examples' ``mnist/main.py`` training loop, run with
``import glyphforge as datasets`` for ``from torchvision import datasets`` (torchvision does not
import here, so its three transforms are written below as torchvision defines them). Files are
synthetic (:mod:`support.synthetic_mnist`), served by a real HTTP mirror on 127.0.0.1, the
records pinned to them with an origin that does not exist.
"""
from __future__ import annotations

import importlib.util
import inspect

import numpy as np
import pytest

import glyphforge as gf
from glyphforge.datasets.classes.declaration import DECLARATIONS

from support.http_server import http_server  # noqa: F401 (fixture)
from support.optional import NO_TORCH
from support.synthetic_mnist import ALL_FILES, SyntheticMNIST, pinned, write_synthetic_mnist

CLASSES = {"mnist": gf.MNIST, "fashion-mnist": gf.FashionMNIST, "kmnist": gf.KMNIST}


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> dict[str, SyntheticMNIST]:
    root = tmp_path_factory.mktemp("torchvision-spellings")
    return {name: write_synthetic_mnist(root / name, (600, 100), seed=index) for index, name in enumerate(CLASSES)}


@pytest.fixture
def served(synthetic, http_server, monkeypatch):  # noqa: F811
    """The three datasets on a mirror given by the environment (``$GLYPHFORGE_MIRROR``), their records pinned."""
    for name, files in synthetic.items():
        monkeypatch.setitem(DECLARATIONS, name, pinned(DECLARATIONS[name], files, (600, 100)))
        for file in ALL_FILES:
            http_server.add(f"{name}/{file}", files.data(file))
    monkeypatch.setenv("GLYPHFORGE_MIRROR", http_server.base_url)
    return http_server


def test_the_signatures_are_torchvisions_first():
    expected = {gf.MNIST: ["root", "train", "transform", "target_transform", "download"],
                gf.FashionMNIST: ["root", "train", "transform", "target_transform", "download"],
                gf.KMNIST: ["root", "train", "transform", "target_transform", "download"],
                gf.EMNIST: ["root", "split", "train", "transform", "target_transform", "download"],
                gf.Omniglot: ["root", "background", "transform", "target_transform", "download"]}
    for kind, names in expected.items():
        parameters = list(inspect.signature(kind).parameters.values())
        assert [parameter.name for parameter in parameters[:len(names)]] == names, kind
        assert all(parameter.kind is parameter.KEYWORD_ONLY for parameter in parameters[len(names):]), kind
        assert "subset" in inspect.signature(kind).parameters and "data_dir" in inspect.signature(kind).parameters


@pytest.mark.parametrize("name", CLASSES)
def test_root_train_download_and_both_transforms(name, served, synthetic, tmp_path):
    files, kind = synthetic[name], CLASSES[name]
    test = kind(tmp_path, False, lambda image: image.T, lambda label: label + 100, True)  # torchvision's order
    assert served.requests() == 4 and test.subset == "test" and len(test) == len(files.test_images)
    image, label = test[7]
    assert np.array_equal(image, files.test_images[7].T) and label == files.test_labels[7] + 100
    train = kind(str(tmp_path), train=True, download=False)  # prepared above: a cache hit, no request
    assert np.array_equal(train.images, files.train_images) and np.array_equal(train.labels, files.train_labels)
    assert repr(train) == repr(kind(data_dir=tmp_path, subset="train")) and served.requests() == 4


@pytest.mark.parametrize("make", [
    lambda root: gf.MNIST(root, train=True, download=False),
    lambda root: gf.FashionMNIST(root, download=False),
    lambda root: gf.KMNIST(root, train=False, download=False),
    lambda root: gf.EMNIST(root, "letters", train=False, download=False),
    lambda root: gf.Omniglot(root, background=True, download=False),
], ids=["MNIST", "FashionMNIST", "KMNIST", "EMNIST", "Omniglot"])
def test_download_false_never_downloads_and_names_the_command(make, served, tmp_path):
    with pytest.raises(FileNotFoundError, match=r"not prepared in .*prepare"):
        make(tmp_path)
    assert served.requests() == 0 and not any((tmp_path / "cache").rglob("*.pklz"))


@pytest.mark.parametrize(("make", "message"), [
    (lambda: gf.MNIST("data", data_dir="elsewhere"),
     r"^give root='data' \(torchvision's name\) or data_dir='elsewhere', not both: both name the data dir$"),
    (lambda: gf.KMNIST(train=True, subset="test"),
     r"^give train=True \(torchvision's name\) or subset='test', not both$"),
    (lambda: gf.EMNIST(split="digits", train=False, subset="all"),
     r"^give train=False \(torchvision's name\) or subset='all', not both$"),
    (lambda: gf.FashionMNIST(train="yes"), r"^train must be True or False \(torchvision's meaning\), not 'yes'"),
    (lambda: gf.MNIST("test"), r"^root 'test' is a subset's name, but the first argument is torchvision's root, the "
                               r"data dir: give subset='test' \(or the directory as './test'\)$"),
    (lambda: gf.Omniglot(background=True, subset="train"),
     r"^give background=True \(torchvision's name\) or subset='train', not both$"),
    (lambda: gf.Omniglot(background=False, sets="small1"),
     r"^give background=False \(the sets evaluation\) or sets='small1', not both$"),
], ids=["root+data_dir", "train+subset", "EMNIST train+subset", "train not a bool", "root a subset",
        "background+subset", "background+sets"])
def test_both_spellings_given_is_an_error_naming_both(make, message, served):
    with pytest.raises(ValueError, match=message):
        make()
    assert served.requests() == 0


# -- pytorch/examples mnist/main.py, with a tiny model and two batches ----------------------------------------------
class transforms:  # noqa: N801  (torchvision.transforms, as the example uses it)
    """torchvision's ``Compose``, ``ToTensor`` (of a uint8 ``(H, W)`` array) and ``Normalize``, as it defines them."""

    class Compose:
        def __init__(self, steps):
            self.steps = steps

        def __call__(self, image):
            for step in self.steps:
                image = step(image)
            return image

    class ToTensor:
        def __call__(self, image):
            import torch

            return torch.from_numpy(np.ascontiguousarray(image)).unsqueeze(0).float().div(255)

    class Normalize:
        def __init__(self, mean, std):
            self.mean, self.std = mean, std

        def __call__(self, tensor):
            return (tensor - self.mean[0]) / self.std[0]


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason=NO_TORCH)
def test_torchvisions_mnist_example_runs_with_only_the_import_changed(served, synthetic, tmp_path, monkeypatch):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F  # noqa: N812  (the example's spelling)
    import torch.optim as optim

    import glyphforge as datasets  # was: from torchvision import datasets

    (tmp_path / "examples").mkdir()
    monkeypatch.chdir(tmp_path / "examples")  # the example's '../data'
    torch.manual_seed(1)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 4, 3, 1)
            self.fc1 = nn.Linear(4 * 13 * 13, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.conv1(x)), 2)
            return F.log_softmax(self.fc1(torch.flatten(x, 1)), dim=1)

    def train(model, device, train_loader, optimizer, epoch, batches=2):
        model.train()
        for batch_idx, (data, target) in enumerate(train_loader):
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            output = model(data)
            loss = F.nll_loss(output, target)
            loss.backward()
            optimizer.step()
            seen.append((tuple(data.shape), data.dtype, target.dtype, loss.item()))
            if batch_idx + 1 == batches:  # the example's --dry-run, after two batches
                break

    def test(model, device, test_loader):
        model.eval()
        test_loss, correct = 0.0, 0
        with torch.no_grad():
            for data, target in test_loader:
                data, target = data.to(device), target.to(device)
                output = model(data)
                test_loss += F.nll_loss(output, target, reduction="sum").item()
                pred = output.argmax(dim=1, keepdim=True)
                correct += pred.eq(target.view_as(pred)).sum().item()
        return test_loss / len(test_loader.dataset), correct

    seen: list = []
    device = torch.device("cpu")
    transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
    dataset1 = datasets.MNIST("../data", train=True, download=True, transform=transform)
    dataset2 = datasets.MNIST("../data", train=False, transform=transform)
    train_loader = torch.utils.data.DataLoader(dataset1, batch_size=64, shuffle=True)
    test_loader = torch.utils.data.DataLoader(dataset2, batch_size=1000)
    model = Net().to(device)
    optimizer = optim.Adadelta(model.parameters(), lr=1.0)
    train(model, device, train_loader, optimizer, 1)
    test_loss, correct = test(model, device, test_loader)

    assert [step[:3] for step in seen] == [((64, 1, 28, 28), torch.float32, torch.int64)] * 2
    assert all(np.isfinite(step[3]) for step in seen) and np.isfinite(test_loss) and 0 <= correct <= 100
    assert len(dataset1) == 600 and len(dataset2) == 100 and served.requests() == 4  # fetched once, into ../data
    assert any((tmp_path / "data" / "cache").rglob("*.pklz"))
    assert np.array_equal(dataset2.images, synthetic["mnist"].test_images)
