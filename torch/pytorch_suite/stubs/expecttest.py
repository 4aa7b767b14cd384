"""A small stand-in for the `expecttest` package, which Debian does not ship.

torch.testing._internal.common_utils needs only the ACCEPT flag and a
TestCase base class; the inline-expectation asserts compare text without
rewriting the test file.
"""

import os
import textwrap
import unittest

ACCEPT = os.environ.get("EXPECTTEST_ACCEPT", "") not in ("", "0")


def _normalize(text):
    return textwrap.dedent(text).strip("\n")


class TestCase(unittest.TestCase):
    longMessage = True

    def assertExpectedInline(self, actual, expect, skip=0):
        self.assertMultiLineEqual(_normalize(expect), _normalize(actual))

    def assertExpectedRaisesInline(self, exc_type, callable, expect, *args, **kwargs):
        with self.assertRaises(exc_type) as caught:
            callable(*args, **kwargs)
        self.assertExpectedInline(str(caught.exception), expect)
