/**
 * Compares two parsed JSON values as values: object key order aside, array order kept, numbers as the
 * doubles JSON.parse reads. Iterative (an explicit stack), so a deeply nested body cannot overflow the
 * call stack.
 */

/** Where two JSON values first differ, walking both depth-first with object keys in sorted order. */
export interface JsonDifference {
  /** RFC 6901 pointer ("" is the whole document). */
  pointer: string;
  /** The client's value there; undefined when the client's document has nothing there. */
  client: unknown;
  /** The alternate's value there; undefined when the alternate's document has nothing there. */
  alternate: unknown;
}

interface Frame {
  readonly client: unknown;
  readonly alternate: unknown;
  readonly parent: Frame | null;
  /** This value's key or index in its parent (unescaped). */
  readonly token: string;
}

/** The first difference, or null when the values are equal. */
export function firstJsonDifference(client: unknown, alternate: unknown): JsonDifference | null {
  const stack: Frame[] = [{ client, alternate, parent: null, token: '' }];
  while (stack.length > 0) {
    const frame = stack.pop()!;
    const a = frame.client;
    const b = frame.alternate;
    if (a === b) continue;
    const kindA = kindOf(a);
    if (kindA !== kindOf(b) || kindA === Kind.Scalar) return difference(frame);
    if (kindA === Kind.Array) {
      const left = a as unknown[];
      const right = b as unknown[];
      // Pushed last to first, so the lowest index is compared first.
      for (let i = Math.max(left.length, right.length) - 1; i >= 0; i--) {
        stack.push({ client: left[i], alternate: right[i], parent: frame, token: String(i) });
      }
      continue;
    }
    const left = a as Record<string, unknown>;
    const right = b as Record<string, unknown>;
    const keys = unionOfKeys(left, right);
    for (let i = keys.length - 1; i >= 0; i--) {
      const key = keys[i]!;
      stack.push({ client: ownValue(left, key), alternate: ownValue(right, key), parent: frame, token: key });
    }
  }
  return null;
}

export function jsonEqual(client: unknown, alternate: unknown): boolean {
  return firstJsonDifference(client, alternate) === null;
}

/** The value at `pointer` (RFC 6901), or undefined when there is none. */
export function valueAt(document: unknown, pointer: string): unknown {
  if (pointer === '') return document;
  let value = document;
  for (const raw of pointer.slice(1).split('/')) {
    const token = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (Array.isArray(value)) value = /^(0|[1-9][0-9]*)$/.test(token) ? value[Number(token)] : undefined;
    else if (value !== null && typeof value === 'object') value = ownValue(value as Record<string, unknown>, token);
    else return undefined;
  }
  return value;
}

const enum Kind {
  /** null, boolean, number, string, or absent (undefined). */
  Scalar,
  Array,
  Object,
}

function kindOf(value: unknown): Kind {
  if (Array.isArray(value)) return Kind.Array;
  return value !== null && typeof value === 'object' ? Kind.Object : Kind.Scalar;
}

/** Own properties only: a "__proto__" or "constructor" key in a body is data, not the prototype's. */
function ownValue(object: Record<string, unknown>, key: string): unknown {
  return Object.prototype.hasOwnProperty.call(object, key) ? object[key] : undefined;
}

function unionOfKeys(left: Record<string, unknown>, right: Record<string, unknown>): string[] {
  const keys = Object.keys(left);
  const seen = new Set(keys);
  for (const key of Object.keys(right)) if (!seen.has(key)) keys.push(key);
  // Code-unit order: the same whatever order either side wrote its keys in.
  return keys.sort();
}

function difference(frame: Frame): JsonDifference {
  const tokens: string[] = [];
  for (let f: Frame | null = frame; f !== null && f.parent !== null; f = f.parent) tokens.push(f.token);
  let pointer = '';
  for (let i = tokens.length - 1; i >= 0; i--) pointer += '/' + tokens[i]!.replace(/~/g, '~0').replace(/\//g, '~1');
  return { pointer, client: frame.client, alternate: frame.alternate };
}
