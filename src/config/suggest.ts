/** The candidate closest to `word`, if it is close enough to be a likely typo. */
export function closestMatch(word: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of candidates) {
    // The distance is at least the difference in length: past the bound below, not worth computing.
    if (Math.abs(candidate.length - word.length) > Math.max(1, Math.floor(candidate.length / 3))) continue;
    const distance = candidate.toLowerCase() === word.toLowerCase() ? 0 : editDistance(word, candidate);
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  if (best !== undefined && bestDistance <= Math.max(1, Math.floor(best.length / 3))) return best;
  // "warning" for "warn", "metric" for "metrics": one word is the start of the other
  const lower = word.toLowerCase();
  return candidates.find((c) => Math.min(c.length, word.length) >= 3 && (lower.startsWith(c.toLowerCase()) || c.toLowerCase().startsWith(lower)));
}

/** editDistance's rows, reused: grown to the longest candidate seen. */
let rows: [Uint32Array, Uint32Array, Uint32Array] = [new Uint32Array(64), new Uint32Array(64), new Uint32Array(64)];

/** Levenshtein distance, with a swap of two neighbours counted as one edit (the commonest typo). */
export function editDistance(a: string, b: string): number {
  // Three rows (the swap looks two back), not a full matrix: hints are computed for every unknown key of a config.
  const cols = b.length + 1;
  if (rows[0].length < cols) rows = [new Uint32Array(cols * 2), new Uint32Array(cols * 2), new Uint32Array(cols * 2)];
  let [before, previous, current] = rows;
  for (let j = 0; j < cols; j++) previous[j] = j;
  for (let i = 1; i <= a.length; i++) {
    current[0] = i;
    for (let j = 1; j < cols; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, before[j - 2]! + 1);
      current[j] = d;
    }
    [before, previous, current] = [previous, current, before];
  }
  return previous[b.length]!;
}
