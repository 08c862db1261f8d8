/**
 * The headers of an upstream's 101 that the client's 101 carries: the end-to-end ones (Set-Cookie, or
 * any the upstream adds). Left out: hop-by-hop headers (those named in its Connection header too),
 * framing, the handshake headers the client's leg negotiates itself (uWS writes Upgrade, Connection,
 * Sec-WebSocket-Accept, the chosen Sec-WebSocket-Protocol and the extensions it agreed with the
 * client), Date (uWS writes its own) and Via (the gateway writes its own).
 */
const LEFT_OUT = new Set([
  'connection',
  'keep-alive',
  'transfer-encoding',
  'content-length',
  'upgrade',
  'te',
  'trailer',
  'date',
  'via',
  'sec-websocket-accept',
  'sec-websocket-extensions',
  'sec-websocket-protocol',
  'sec-websocket-version',
]);

/** Flat [name, value, ...] (names lower case) from an IncomingMessage's rawHeaders. */
export function acceptedHeaders(raw: readonly string[]): string[] {
  let named: Set<string> | null = null;
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.toLowerCase() !== 'connection') continue;
    for (const token of raw[i + 1]!.split(',')) {
      const name = token.trim().toLowerCase();
      if (name !== '') (named ??= new Set()).add(name);
    }
  }
  const headers: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (LEFT_OUT.has(name) || name.startsWith('proxy-') || named?.has(name)) continue;
    headers.push(name, raw[i + 1]!);
  }
  return headers;
}
