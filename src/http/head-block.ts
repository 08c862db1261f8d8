/**
 * The head of an answer the gateway writes many times as it is (a cache entry's answer, rebuilt once a
 * second for its Age): its status line, its headers and Via, as the UTF-8 bytes uWS would make of
 * that text, kept so that each write is one copy instead of the text built and converted again.
 * writeContent (problem-json.ts) fills it at the first write, and again if Via changed (a reload).
 */
export class HeadBlock {
  /** The Via it was made with; null until the first write. */
  via: string | null = null;
  bytes: Buffer = Buffer.alloc(0);
  /** The text's length in UTF-16 units (the cork estimate's input, as for the text itself). */
  length = 0;
  /** A list of withheld names last seen to leave the answer's headers whole (the writer's to keep). */
  keeps: readonly string[] | null = null;
}
