"""bench.worldgen runs end to end (a few resets; its timings are not asserted)."""

from bench import worldgen


def test_worldgen_bench_times_both_variants_on_both_clocks(capsys):
    worldgen.main(["--resets", "2", "--blocks", "2"])
    out = capsys.readouterr().out
    rows = [line.split("|")[1:4] for line in out.splitlines() if line.startswith(("| direct", "| tables"))]
    assert [(noise.strip(), clock.strip()) for noise, clock, _ in rows] == [
        ("direct", "wall"), ("tables", "wall"), ("direct", "cpu"), ("tables", "cpu")
    ]
    assert all(float(ms) > 0 for *_, ms in rows)
    assert "speed-up direct/tables (wall)" in out and "speed-up direct/tables (cpu)" in out
    assert "tables  numba cache warm: import" in out
