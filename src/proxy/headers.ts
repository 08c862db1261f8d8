/**
 * Header rules of the proxy's response side (contract 7). The upstream client has already removed the
 * framing and hop-by-hop headers (every header any Connection header names included; see
 * src/upstream/README.md); what the data plane still does by name: Date is dropped (uWS writes its
 * own), Via gets the gateway's entry appended.
 */

/** `name` (a header name as received) is Date, any case; callers check `name.length === 4` first. */
export function isDateHeader(name: Buffer): boolean {
  return (name[0] | 0x20) === 0x64 && (name[1] | 0x20) === 0x61 && (name[2] | 0x20) === 0x74 && (name[3] | 0x20) === 0x65;
}

/** `name` is Via, any case; callers check `name.length === 3` first. */
export function isViaHeader(name: Buffer): boolean {
  return (name[0] | 0x20) === 0x76 && (name[1] | 0x20) === 0x69 && (name[2] | 0x20) === 0x61;
}
