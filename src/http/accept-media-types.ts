/**
 * Which offered media types an `Accept` header allows, best first: routed negotiation
 * (routing/negotiate.ts) and the built-in endpoints share this one rule.
 *
 * It is negotiator's (q-values, `q=0` refuses, the most specific matching range decides, then header
 * order, then offer order; names and values compared case-insensitively, a `*` value matches any)
 * with one exception: a `charset` parameter on an Accept range is compared only with an offer that
 * has a charset. Against an offer without one the range is read as if it had no charset, so
 * `application/json; charset=utf-8` accepts an `application/json` offer (RFC 9110 12.5.1 leaves
 * parameters to the server to judge; negotiator requires every range parameter on the offer).
 *
 * An offer may itself be a range (an endpoint documented as producing any type, or `application/*`):
 * it is allowed when some type it covers is (negotiator allows such an offer only for Accept's `*` + `/*`).
 *
 * The header is parsed as negotiator parses it (content-type's lenient parser): ranges without a
 * slash are skipped, the first of repeated parameters counts, quoted values are unescaped.
 */

interface MediaRange {
  type: string;
  subtype: string;
  params: Map<string, string>;
  q: number;
  /** Position in the header. */
  order: number;
}

interface Priority {
  /** Specificity: 4 type named, 2 subtype named, 1 parameters compared. */
  s: number;
  q: number;
  /** Position of the deciding range in the header. */
  o: number;
  /** Position of the offer. */
  i: number;
}

const SP = 0x20;
const HTAB = 0x09;
const SEMI = 0x3b;
const EQ = 0x3d;
const DQUOTE = 0x22;
const BSLASH = 0x5c;
const COMMA = 0x2c;

function skipOws(text: string, index: number, stop: number): number {
  while (index < stop) {
    const c = text.charCodeAt(index);
    if (c !== SP && c !== HTAB) break;
    index++;
  }
  return index;
}

function trimOwsEnd(text: string, start: number, end: number): number {
  while (end > start) {
    const c = text.charCodeAt(end - 1);
    if (c !== SP && c !== HTAB) break;
    end--;
  }
  return end;
}

function skipValue(text: string, index: number, stopAtComma: boolean): number {
  while (index < text.length) {
    const c = text.charCodeAt(index);
    if (c === SEMI || (stopAtComma && c === COMMA)) break;
    index++;
  }
  return index;
}

/** One media type (and its parameters) from `index`; with `stopAtComma`, one element of a list. */
function parseOne(text: string, start: number, stopAtComma: boolean): { type: string; params: Map<string, string>; end: number } {
  const len = text.length;
  let index = skipOws(text, start, len);
  const typeStart = index;
  index = skipValue(text, index, stopAtComma);
  const type = text.slice(typeStart, trimOwsEnd(text, typeStart, index));
  const params = new Map<string, string>();
  parameter: while (index < len) {
    if (stopAtComma && text.charCodeAt(index) === COMMA) break;
    index = skipOws(text, index + 1, len);
    const keyStart = index;
    while (index < len) {
      const c = text.charCodeAt(index);
      if (stopAtComma && c === COMMA) break parameter;
      if (c === SEMI) continue parameter;
      if (c === EQ) {
        const key = text.slice(keyStart, trimOwsEnd(text, keyStart, index)).toLowerCase();
        index = skipOws(text, index + 1, len);
        if (index < len && text.charCodeAt(index) === DQUOTE) {
          index++;
          let value = '';
          while (index < len) {
            const q = text.charCodeAt(index++);
            if (q === DQUOTE) {
              // Anything between the closing quote and the next separator is dropped.
              index = skipValue(text, index, stopAtComma);
              if (!params.has(key)) params.set(key, value);
              break;
            }
            if (q === BSLASH && index < len) {
              value += text[index++];
              continue;
            }
            value += String.fromCharCode(q);
          }
          continue parameter;
        }
        const valueStart = index;
        index = skipValue(text, index, stopAtComma);
        if (!params.has(key)) params.set(key, text.slice(valueStart, trimOwsEnd(text, valueStart, index)));
        continue parameter;
      }
      index++;
    }
  }
  return { type, params, end: index };
}

function toRange(type: string, params: Map<string, string>, order: number): MediaRange | null {
  const slash = type.indexOf('/');
  if (slash === -1) return null;
  const qValue = params.get('q');
  params.delete('q');
  return {
    type: type.slice(0, slash),
    subtype: type.slice(slash + 1),
    params,
    // A q that is not a number refuses, as in negotiator.
    q: qValue ? parseFloat(qValue) : 1,
    order,
  };
}

function parseAccept(header: string): MediaRange[] {
  const ranges: MediaRange[] = [];
  let index = 0;
  let order = 0;
  while (index < header.length) {
    const one = parseOne(header, index, true);
    const range = toRange(one.type, one.params, order++);
    if (range !== null) ranges.push(range);
    index = one.end + 1;
  }
  return ranges;
}

function parseOffer(offer: string): MediaRange | null {
  const one = parseOne(offer, 0, false);
  return toRange(one.type, one.params, 0);
}

function specificity(offer: MediaRange, range: MediaRange, offerIndex: number): Priority | null {
  let s = 0;
  if (range.type.toLowerCase() === offer.type.toLowerCase()) s |= 4;
  else if (range.type !== '*') return null;
  if (range.subtype.toLowerCase() === offer.subtype.toLowerCase()) s |= 2;
  else if (range.subtype !== '*') return null;
  let compared = false;
  for (const [name, value] of range.params) {
    if (name === 'charset' && !offer.params.has('charset')) continue;
    compared = true;
    if (value !== '*' && value.toLowerCase() !== (offer.params.get(name) ?? '').toLowerCase()) return null;
  }
  if (compared) s |= 1;
  return { s, q: range.q, o: range.order, i: offerIndex };
}

function priorityOf(offer: MediaRange | null, ranges: readonly MediaRange[], offerIndex: number): Priority {
  let best: Priority = { s: 0, q: 0, o: -1, i: offerIndex };
  if (offer === null) return best;
  if (offer.type === '*' || offer.subtype === '*') return coveredPriority(offer, ranges, offerIndex);
  for (const range of ranges) {
    const p = specificity(offer, range, offerIndex);
    // negotiator's comparison, NaN q included: more specific, then higher q, then later in the header.
    if (p !== null && (best.s - p.s || best.q - p.q || best.o - p.o) < 0) best = p;
  }
  return best;
}

/** Stands for a type or subtype no range names. */
const UNNAMED = '\u0000';

/**
 * An offer that is a range (an endpoint documented as producing any type, as springfox and springdoc
 * do by default, or `application/*`) can answer any type in it: its priority is that of the best type
 * it covers. Those worth trying are where it meets each range (the range's type, its parameters) and
 * one no range names; each is judged by the rule for concrete offers, so `text/*;q=0, *` + `/*`
 * refuses an offer of `text/*` and allows one of the any-type range.
 */
function coveredPriority(offer: MediaRange, ranges: readonly MediaRange[], offerIndex: number): Priority {
  let best = priorityOf(meet(offer, null)!, ranges, offerIndex);
  for (const range of ranges) {
    const covered = meet(offer, range);
    if (covered === null) continue;
    const p = priorityOf(covered, ranges, offerIndex);
    if (p.q > best.q || (p.q === best.q && p.s > best.s)) best = p;
  }
  return best;
}

/** The concrete type where the range offer and `range` meet (null: they do not), or one no range names. */
function meet(offer: MediaRange, range: MediaRange | null): MediaRange | null {
  const type = part(offer.type, range?.type);
  const subtype = part(offer.subtype, range?.subtype);
  if (type === null || subtype === null) return null;
  const params = new Map(range?.params);
  for (const [name, value] of offer.params) params.set(name, value);
  return { type, subtype, params, q: 1, order: 0 };
}

function part(offered: string, ranged: string | undefined): string | null {
  if (offered !== '*') return ranged === undefined || ranged === '*' || ranged.toLowerCase() === offered.toLowerCase() ? offered : null;
  return ranged === undefined || ranged === '*' ? UNNAMED : ranged;
}

/** The offers `accept` allows, best first. An absent header accepts everything; an empty one nothing. */
export function acceptedMediaTypes(accept: string | undefined, offers: readonly string[]): string[] {
  const ranges = parseAccept(accept ?? '*/*');
  return offers
    .map((offer, i) => priorityOf(parseOffer(offer), ranges, i))
    .filter((p) => p.q > 0)
    .sort((a, b) => b.q - a.q || b.s - a.s || a.o - b.o || a.i - b.i || 0)
    .map((p) => offers[p.i]!);
}

/** The offer `accept` prefers, or undefined when it allows none. */
export function preferredMediaType(accept: string | undefined, offers: readonly string[]): string | undefined {
  return acceptedMediaTypes(accept, offers)[0];
}
