/**
 * The request methods uWebSockets.js hands to a handler: its fixed list, upper case, as the method
 * token of a request line is case-sensitive (RFC 9110 9.1). A request with any other method (`get`,
 * `PROPFIND`, `PURGE`, `M-SEARCH`) is closed at once, with no answer, before `any('/*')` runs, whatever
 * the gateway configures (native-notes.md, "Extension methods"; test/edge/edge-request-line.test.ts).
 * Measured with raw sockets on 20.30.0-unofficial.0: these nine got an answer, and lower-case `get`,
 * `Get`, `post` and 30 registered extension methods got none.
 */
export const UWS_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'CONNECT', 'OPTIONS', 'TRACE', 'PATCH']);
