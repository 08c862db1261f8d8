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

/** The ones of `headers`, the 101's flat [name, value, ...] with names in lower case, that the client's 101 carries. */
export function acceptedHeaders(headers: readonly string[]): string[] {
  let named: Set<string> | null = null;
  for (let i = 0; i < headers.length; i += 2) {
    if (headers[i] !== 'connection') continue;
    for (const token of headers[i + 1]!.split(',')) {
      const name = token.trim().toLowerCase();
      if (name !== '') (named ??= new Set()).add(name);
    }
  }
  const accepted: string[] = [];
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i]!;
    if (LEFT_OUT.has(name) || name.startsWith('proxy-') || named?.has(name)) continue;
    accepted.push(name, headers[i + 1]!);
  }
  return accepted;
}
