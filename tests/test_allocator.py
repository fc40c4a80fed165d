"""``keep_freed_memory``: freed memory is reused, not page-faulted in again at every step."""

import platform
import resource

import numpy as np
import pytest

from solutions import training as tr

glibc = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")


def _faults_of_repeated_temporaries(rounds=50):
    """Minor page faults while a loop allocates, touches and frees the temporaries of a
    training step's size (1 MiB blocks, several alive at once)."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(rounds):
        blocks = [np.ones(2**18, dtype=np.float32) for _ in range(8)]   # 8 x 1 MiB
        del blocks
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


@glibc
def test_after_it_a_loop_of_temporaries_takes_no_page_fault():
    assert tr.keep_freed_memory() is True
    _faults_of_repeated_temporaries(2)                  # the heap grows once
    # 50 rounds of 8 MiB freshly mapped would be 50 * 2048 faults of 4 KiB pages
    assert _faults_of_repeated_temporaries() < 100

