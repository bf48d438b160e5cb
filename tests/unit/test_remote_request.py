"""Every sampling option reaches every node: ``remote_argv`` (hangscope/remote/request.py) is
the one place ``SampleOptions`` become a remote ``hangscope dump`` command line, and the
command line of the watcher a multi-node ``watch`` starts on each node.

GIVEN each field of ``SampleOptions`` set to a value other than its default WHEN turned into
the remote argv and parsed back by the real ``dump`` parser THEN the remote samples with the
same options (a new option that is not passed on fails here, as ``--no-progress`` did).
"""

from __future__ import annotations

import dataclasses

import pytest

from hangscope.cli import build_parser
from hangscope.commands.dump import options_from
from hangscope.live.sampler import SampleOptions
from hangscope.remote.find import Spec
from hangscope.remote.request import Pulse, remote_argv

SPEC = Spec("env", "TORCHELASTIC_RUN_ID", "job-7")


def _other(field: dataclasses.Field) -> object:
    """A valid value of the field that is not its default."""
    default = field.default
    if isinstance(default, bool):
        return not default
    if field.name == "workers":  # None: one per core; a number is what a user gives
        return 3
    if isinstance(default, int):
        return default + 2
    if isinstance(default, float):
        return default + 1.5
    raise AssertionError(f"SampleOptions.{field.name}: say here how to vary it")


PULSE = Pulse(after=20.0, interval=2.5)


def _remote_options(options: SampleOptions, pulse: Pulse | None = None) -> SampleOptions:
    argv = remote_argv(SPEC, options, pulse)
    if pulse is None:
        args = build_parser().parse_args(["dump", *argv])
        assert args.find == str(SPEC) and args.format == "json"
    else:  # the watcher a multi-node watch starts on each node
        args = build_parser().parse_args(["watch", *argv])
        assert args.find == str(SPEC) and args.events
        assert (args.after, args.interval) == (pulse.after, pulse.interval)
    return options_from(args)


@pytest.mark.parametrize("pulse", [None, PULSE], ids=["dump", "watch"])
@pytest.mark.parametrize("field", dataclasses.fields(SampleOptions), ids=lambda f: f.name)
def test_each_sampling_option_reaches_the_remote_dump(field: dataclasses.Field,
                                                     pulse: Pulse | None) -> None:
    options = dataclasses.replace(SampleOptions(), **{field.name: _other(field)})
    assert getattr(options, field.name) != getattr(SampleOptions(), field.name)
    assert _remote_options(options, pulse) == options


def test_the_defaults_and_every_option_at_once_reach_the_remote_dump() -> None:
    assert _remote_options(SampleOptions()) == SampleOptions()
    every = SampleOptions(**{f.name: _other(f) for f in dataclasses.fields(SampleOptions)})
    # --kernels pauses ranks and --nonblocking promises not to: the one pair that cannot go
    # together is tried as two requests (each field is also varied alone above).
    for one in (dataclasses.replace(every, kernels=False),
                dataclasses.replace(every, nonblocking=False)):
        assert _remote_options(one) == one
