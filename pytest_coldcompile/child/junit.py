"""JUnit XML from a cold child: a stand-in for pytest's LogXML that writes
``record_xml_attribute`` and ``record_testsuite_property`` calls as records, which the parent
replays on its own LogXML.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_coldcompile import interop
from pytest_coldcompile.child_spec import ChildSpec
from pytest_coldcompile.records import (
    write_record,
)


class _AttributeRecorder:
    """What record_xml_attribute gets in a cold child: each attribute becomes a record."""

    def __init__(self, test_dir: str) -> None:
        self.test_dir = test_dir

    def add_attribute(self, name: str, value: object) -> None:
        write_record(
            self.test_dir,
            {"type": "junitxml", "what": "attribute", "name": str(name), "value": str(value)},
        )

class JunitRecorder:
    """Stands in for pytest's LogXML (``config.stash[xml_key]``) in a cold child.

    record_xml_attribute and record_testsuite_property write records instead of filling an
    XML tree that dies with the child; the parent replays them on its own LogXML.
    """

    def __init__(self, test_dir: str, family: str) -> None:
        self.test_dir = test_dir
        self.family = family  # record_xml_attribute warns about xunit2 from it, as in-process

    def node_reporter(self, report: Any) -> _AttributeRecorder:
        return _AttributeRecorder(self.test_dir)

    def add_global_property(self, name: str, value: object) -> None:
        __tracebackhide__ = True
        try:
            from _pytest.junitxml import _check_record_param_type
        except ImportError:  # private; the same check, said the same way
            if not isinstance(name, str):
                raise TypeError(
                    f"name parameter needs to be a string, but {type(name)} given"
                ) from None
        else:
            _check_record_param_type("name", name)
        write_record(
            self.test_dir,
            {"type": "junitxml", "what": "suite_property", "name": name, "value": str(value)},
        )

def record_junitxml(config: pytest.Config, spec: ChildSpec, test_dir: str) -> None:
    """Put a JunitRecorder where record_xml_attribute/record_testsuite_property look."""
    xml = interop.junit_xml(config)
    if xml is not None:  # forked: the parent's LogXML, copied
        family = str(getattr(xml, "family", "xunit1"))
    elif spec.get("mode") == "fork":  # forked from a parent that writes no XML
        return
    elif "junit_family" in spec:  # re-collected: the parent said whether it writes XML
        if spec["junit_family"] is None:
            return
        family = str(spec["junit_family"])
    else:  # a parent that does not say: record anyway, the parent drops what it cannot use
        family = str(config.getini("junit_family"))
    interop.set_junit_xml(config, JunitRecorder(test_dir, family))
