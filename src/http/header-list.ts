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
