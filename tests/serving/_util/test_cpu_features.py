"""The CPU's bf16 matrix instructions are read from /proc/cpuinfo's flags line."""

from __future__ import annotations

from serving._util.cpu_features import bf16_native, cpu_flags


def test_flags_come_from_the_flags_line(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: X\nflags\t\t: fpu avx2 avx512f avx512_bf16\nbugs\t\t: spectre\n")
    flags = cpu_flags(str(info))
    assert "avx512_bf16" in flags and "avx2" in flags and "spectre" not in flags
    assert bf16_native(flags) is True


def test_without_bf16_flags_or_without_cpuinfo(tmp_path):
    assert bf16_native(frozenset({"avx2", "avx512f"})) is False
    assert bf16_native(frozenset({"amx_bf16"})) is True
    assert cpu_flags(str(tmp_path / "missing")) == frozenset()
    assert bf16_native(frozenset()) is None  # unknown, not "no"
