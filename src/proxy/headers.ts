/**
 * Header rules of the proxy's response side (docs/reference/respond.md#upstream-answers). The upstream client has already removed the
 * framing and hop-by-hop headers (every header any Connection header names included; see
 * src/upstream/README.md); what the data plane still does by name: Date is dropped (uWS writes its
 * own), Via gets the gateway's entry appended.
 */

/** The header name at `name[at]` (as received) is Date, any case; callers check its length is 4 first. */
export function isDateHeader(name: Uint8Array, at = 0): boolean {
  return (name[at]! | 0x20) === 0x64 && (name[at + 1]! | 0x20) === 0x61 && (name[at + 2]! | 0x20) === 0x74 && (name[at + 3]! | 0x20) === 0x65;
}

/** The header name at `name[at]` is Via, any case; callers check its length is 3 first. */
export function isViaHeader(name: Uint8Array, at = 0): boolean {
  return (name[at]! | 0x20) === 0x76 && (name[at + 1]! | 0x20) === 0x69 && (name[at + 2]! | 0x20) === 0x61;
}
