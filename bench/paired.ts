import { median } from './stats.js'

// The figure of a row whose two sides are one process, read against each other load by load
// (bench/README.md, "How it measures").

/**
 * The reference's CPU per answer ÷ the gateway's for a row with `splits` (per round the
 * gateway's load then its reference's, `splits` times: g0 r0 g1 r1 …): each load within a
 * round but its first and last against the mean of the two loads of the other side on either
 * side of it, so that a machine growing faster or slower through a round at a steady pace
 * moves no ratio; their median, and how many ratios (undefined when there are none: no whole
 * round). With one split per round, each round's reference against its gateway.
 */
export function pairedRatio(gateway: readonly number[], reference: readonly number[], splits: number): { cpuRatio: number; ratios: number } | undefined {
  if (!Number.isInteger(splits) || splits < 1) throw new Error(`splits must be a whole number of at least 1, not ${splits}`)
  const ratios: number[] = []
  const rounds = Math.min(Math.floor(gateway.length / splits), Math.floor(reference.length / splits))
  for (let round = 0; round < rounds; round += 1) {
    // This round's loads in the order they ran; the even ones the gateway's.
    const loads: number[] = []
    for (let part = 0; part < splits; part += 1) loads.push(gateway[round * splits + part] as number, reference[round * splits + part] as number)
    if (splits === 1) {
      ratios.push((loads[1] as number) / (loads[0] as number))
      continue
    }
    for (let j = 1; j < loads.length - 1; j += 1) {
      const around = ((loads[j - 1] as number) + (loads[j + 1] as number)) / 2
      const load = loads[j] as number
      ratios.push(j % 2 === 1 ? load / around : around / load)
    }
  }
  if (ratios.length === 0) return undefined
  // Unrounded: the report prints the percentage it makes, and judges that figure as printed.
  return { cpuRatio: median(ratios), ratios: ratios.length }
}

/** How far a round's ratio may stray from the median of its row's before the row is named unsteady. */
export const UNSTEADY_SPREAD = 0.15

/**
 * Each round's reference ÷ gateway CPU per answer (the two loads run back to back) for a row
 * of one split per round, when some round's ratio strays from their median by more than
 * UNSTEADY_SPREAD of it; undefined when every round agrees, or when there are fewer than two
 * rounds. The table's ratio takes each side's median apart, so a round whose loads met another
 * process's work can make it on its own (docs/performance.md, "The rounds behind a ratio").
 */
export function unsteadyRounds(gateway: readonly number[], reference: readonly number[]): number[] | undefined {
  const ratios = gateway.slice(0, reference.length).map((cpu, i) => (reference[i] as number) / cpu)
  if (ratios.length < 2) return undefined
  const middle = median(ratios)
  return ratios.some((ratio) => Math.abs(ratio - middle) > UNSTEADY_SPREAD * middle) ? ratios : undefined
}
