/**
 * A field's value in a flat [name, value, ...] header list (lower-case names): every line of that name
 * joined with ", ", as RFC 9110 5.3 reads several lines; undefined when absent.
 */
export function fieldValue(headers: readonly string[], name: string): string | undefined {
  let value: string | undefined;
  for (let i = 0; i < headers.length; i += 2) {
    if (headers[i] === name) value = value === undefined ? headers[i + 1] : `${value}, ${headers[i + 1]}`;
  }
  return value;
}

/** `headers` ([name, value, ...], lower-case names) without the `names`; the same array when none is there. */
export function withoutNames(headers: readonly string[], names: readonly string[]): readonly string[] {
  let kept: string[] | null = null;
  for (let i = 0; i < headers.length; i += 2) {
    if (names.includes(headers[i]!)) kept ??= headers.slice(0, i);
    else kept?.push(headers[i]!, headers[i + 1]!);
  }
  return kept ?? headers;
}
