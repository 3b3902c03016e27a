import importlib
import os
import sys

import pytest
import torch

# the three files live at the repository root, next to tests/
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def pytest_configure(config):
    config.addinivalue_line("markers", "learning: trains an agent to a return (-m 'not learning' skips them)")
    config.addinivalue_line("markers", "slow: a run of the loops of 1.5 s or more, with processes, resumes or replays "
                                       "(-m 'not learning and not slow': the quick subset for an edit loop)")


@pytest.fixture(autouse=True)
def one_thread_and_seed():
    """Tests run two at a time on two cores (pytest -n 2): one torch thread each, and a fixed seed."""
    torch.set_num_threads(1)
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def no_figure_in_learning_tests(request, monkeypatch):
    """A learning test asserts a return, not a figure: its runs draw none (a redraw costs 0.2-0.4 s; a short run's
    figure was half its time). Every other test's run still draws its figure through extras.tools.draw_run."""
    if request.node.get_closest_marker("learning"):
        monkeypatch.setattr(importlib.import_module("extras.tools"), "draw_run", lambda history, title, path: None)
