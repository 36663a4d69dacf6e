"""What the PEs of a merged model program hold (`frontend.model_program`), counted from
its parts before or after the merge: the registers of the parts on each PE (where a
move's chain counters would overfill them, `crowded_registers`) and the SRAM words of
the holds on a PE whose merged tile overfills it (`lighter_holds`: holds sized "auto"
shrink there)."""

from __future__ import annotations

from fabric import MergedProgram, Part


def lighter_holds(config, merged: MergedProgram, counts: dict,
                  hold_parts: dict[tuple, list[Part]]) -> dict | None:
    """Hold counts with fewer holds where the merged tiles overfill a PE's SRAM: on the
    first such PE that holds of a move lie on, the move with the most words of holds there
    keeps as many fewer as its excess of words needs (none left: the move goes without
    holds, fewer samples on its way, the same words). None when no overfull PE has a
    hold."""
    for placement in merged.program.placements:
        tile = placement.tile
        addresses = tile.addresses(config.sram_words)
        used = max((addresses[s.name] + s.words for s in tile.symbols.values()), default=0)
        if used <= config.sram_words:
            continue
        pe = (placement.rect.row, placement.rect.col)
        words = {key: [words_at(part, pe) for part in into]
                 for key, into in hold_parts.items()}
        words = {key: w for key, w in words.items() if sum(w)}
        if not words:
            continue
        key = max(words, key=lambda k: sum(words[k]))
        per_hold = max(words[key])
        drop = min(len(words[key]), -(-(used - config.sram_words) // per_hold))
        return {**counts, key: counts[key] - drop}
    return None


def words_at(part: Part, pe: tuple[int, int]) -> int:
    """SRAM words `part`'s tiles declare on PE `pe` of the merged fabric (0 where it has
    none)."""
    return sum(s.words for placement in part.program.placements
               if part.rect(placement.rect).contains(*pe)
               for s in placement.tile.symbols.values())


def crowded_registers(config, parts: list[Part]) -> set[tuple[int, int]]:
    """The PEs whose registers do not hold those of every part on them, counted apart."""
    count: dict[tuple[int, int], int] = {}
    for part in parts:
        for placement in part.program.placements:
            n = len(placement.tile.used_registers())
            for pe in part.rect(placement.rect).pes():
                count[pe] = count.get(pe, 0) + n
    return {pe for pe, n in count.items() if n > config.num_registers}


def part_pes(part: Part) -> set[tuple[int, int]]:
    """The PEs of the merged fabric where `part` has a tile."""
    return {pe for placement in part.program.placements
            for pe in part.rect(placement.rect).pes()}
