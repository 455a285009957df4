import pytest
from forked_commands import forkserver_context


@pytest.fixture(scope="module")
def forkserver():
    return forkserver_context()
