import json
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
VECTORS = REPO / "spec" / "vectors"


def load_vectors(name):
    with open(VECTORS / name) as f:
        return json.load(f)


@pytest.fixture
def repo():
    return REPO
