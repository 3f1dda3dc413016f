"""A job's template builds a huge value in a variable, which is never output (SPEC §14).

A render's output is bounded as it is written (1 MiB), but a value kept in a
variable is not written: ``replaceAll "0" $a $a`` made 100 MB of a 10 kB
string, in herder's memory, from a template of 70 bytes, and one more step a
hundred gigabytes. Every string a template function returns is held to the
output's bound, and the functions that multiply or join their input are
refused before they build more. And a render is bounded in time: under the step
count, a ``range`` calling ``replaceAll`` on a value of 700 kB took minutes.
"""

from __future__ import annotations

import tracemalloc

import pytest

from herder.client.hooks.gotemplate import Template, TemplateError
from herder.client.hooks.template_functions import FUNCTION_NAMES, PURE_FUNCTIONS
from herder.deadline import TimeLimitExceeded, time_limit

TEN_KB = '{{ $a := printf "%010000d" 0 }}'
MEGABYTE = TEN_KB + '{{ $m := replaceAll "0" "%s" $a }}' % ("0" * 70)  # 700 kB


@pytest.mark.parametrize(("text", "function"), [
    (TEN_KB + '{{ $b := replaceAll "0" $a $a }}{{ len $b }}', "replaceAll"),
    (TEN_KB + '{{ $b := replaceAll "" $a $a }}{{ len $b }}', "replaceAll"),
    (TEN_KB + '{{ $b := join $a (split "0" $a) }}{{ len $b }}', "join"),
    (MEGABYTE + '{{ $b := printf "%s%s%s%s%s%s%s%s" $m $m $m $m $m $m $m $m }}{{ len $b }}', "printf"),
    (MEGABYTE + '{{ $b := print $m $m $m $m $m $m $m $m }}{{ len $b }}', "print"),
], ids=["replaceAll", "replaceAll-empty", "join", "printf", "print"])
def test_a_huge_value_in_a_variable_is_refused_before_it_is_built(text: str, function: str) -> None:
    tracemalloc.start()
    try:
        with pytest.raises(TemplateError, match=f"error calling {function}: the result would be longer than 1048576"):
            Template(text, functions=FUNCTION_NAMES).execute(None, PURE_FUNCTIONS)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20, f"{peak >> 20} MiB"


def test_values_within_the_bound_still_render() -> None:
    text = TEN_KB + '{{ len (replaceAll "00" "1" $a) }} {{ join "," (split "0" "a0b0c") }} {{ printf "%s-%s" "x" "y" }}'
    assert Template(text, functions=FUNCTION_NAMES).execute(None, PURE_FUNCTIONS) == "5000 a,b,c x-y"


def test_a_render_slow_in_few_steps_is_stopped_naming_the_limit() -> None:
    # Each step scans 700 kB: the render's time limit (lowered here) is checked at every step, not
    # only every so many, so it stops after the first few rather than after minutes.
    with time_limit(0.5, "rendering the template"), pytest.raises(TimeLimitExceeded) as raised:
        Template(MEGABYTE + '{{ range 1000000 }}{{ $x := replaceAll "0" "1" $m }}{{ end }}done',
                 functions=FUNCTION_NAMES).execute(None, PURE_FUNCTIONS)
    assert str(raised.value) == "rendering the template takes more than 0.5 s of CPU time (its limit)"
