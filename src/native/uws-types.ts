/**
 * The part of the uWebSockets.js API the gateway uses. Every build we load (official, btc-vision fork,
 * trufflesuite fork) has these with these signatures; see native-notes.md.
 */

/** Anything uWS copies into its own buffers without a JS string round trip. */
export type UwsBytes = string | ArrayBuffer | Uint8Array;

/** Opaque native handle of a listening socket. */
export type UwsListenSocket = object;

export interface UwsResponse {
  writeStatus(status: UwsBytes): UwsResponse;
  writeHeader(key: UwsBytes, value: UwsBytes): UwsResponse;
  /** Chunked transfer encoding; true when nothing was left in the backpressure buffer. */
  write(chunk: UwsBytes): boolean;
  end(body?: UwsBytes, closeConnection?: boolean): UwsResponse;
  /** Without an argument no Content-Length is written (see native-notes.md on the argument form). */
  endWithoutBody(reportedContentLength?: number, closeConnection?: boolean): UwsResponse;
  /** Writes what the socket takes now; [ok, done]. A not-ok remainder must be retried from onWritable. */
  tryEnd(chunk: UwsBytes, totalSize: number): [boolean, boolean];
  close(): UwsResponse;
  getWriteOffset(): number;
  onWritable(handler: (offset: number) => boolean): UwsResponse;
  onAborted(handler: () => void): UwsResponse;
  onData(handler: (chunk: ArrayBuffer, isLast: boolean) => void): UwsResponse;
  getRemoteAddressAsText(): ArrayBuffer;
  getRemoteAddress(): ArrayBuffer;
  cork(cb: () => void): UwsResponse;
  /** Stops reading the request body from the socket. */
  pause(): void;
  resume(): void;
  /**
   * Completes a WebSocket upgrade (only in a WebSocketBehavior's upgrade handler, or later inside cork
   * with the values read there). `userData` is what getUserData() returns on the WebSocket.
   */
  upgrade(userData: object, secWebSocketKey: UwsBytes, secWebSocketProtocol: UwsBytes, secWebSocketExtensions: UwsBytes, context: UwsSocketContext): void;
}

/** Opaque native handle passed to an upgrade handler. */
export type UwsSocketContext = object;

/** A server-side WebSocket, valid from its open handler to its close handler. No build we load can pause reading one. */
export interface UwsWebSocket<UserData> {
  /** 1 sent, 0 sent but buffered (backpressure), 2 dropped (over maxBackpressure). */
  send(message: UwsBytes, isBinary?: boolean, compress?: boolean): number;
  getBufferedAmount(): number;
  /** Close frame with code and reason, then the close handler runs at once. */
  end(code?: number, shortMessage?: UwsBytes): void;
  /** No close frame; the close handler runs at once with 1006. */
  close(): void;
  cork(cb: () => void): UwsWebSocket<UserData>;
  getUserData(): UserData;
  getRemoteAddress(): ArrayBuffer;
}

export interface UwsWebSocketBehavior<UserData> {
  compression?: number;
  maxPayloadLength?: number;
  /** Seconds, 0 or 8..960. */
  idleTimeout?: number;
  maxBackpressure?: number;
  closeOnBackpressureLimit?: boolean;
  sendPingsAutomatically?: boolean;
  upgrade?: (res: UwsResponse, req: UwsRequest, context: UwsSocketContext) => void;
  open?: (ws: UwsWebSocket<UserData>) => void;
  message?: (ws: UwsWebSocket<UserData>, message: ArrayBuffer, isBinary: boolean) => void;
  /** A ping came (uWS answers it itself). */
  ping?: (ws: UwsWebSocket<UserData>, message: ArrayBuffer) => void;
  drain?: (ws: UwsWebSocket<UserData>) => void;
  close?: (ws: UwsWebSocket<UserData>, code: number, message: ArrayBuffer) => void;
}

export interface UwsRequest {
  getHeader(lowerCaseKey: string): string;
  getUrl(): string;
  getMethod(): string;
  getCaseSensitiveMethod(): string;
  /** The raw query string without "?"; some builds return undefined when there is none. */
  getQuery(): string | undefined;
  forEach(cb: (key: string, value: string) => void): void;
}

export type UwsHandler = (res: UwsResponse, req: UwsRequest) => void;

export interface UwsApp {
  any(pattern: string, handler: UwsHandler): UwsApp;
  get(pattern: string, handler: UwsHandler): UwsApp;
  /** WebSocket route: GETs with a Sec-WebSocket-Key go to `upgrade`, other requests on to the next matching route. */
  ws<UserData>(pattern: string, behavior: UwsWebSocketBehavior<UserData>): UwsApp;
  listen(host: string, port: number, cb: (listenSocket: UwsListenSocket | false) => void): UwsApp;
  listen(port: number, options: number, cb: (listenSocket: UwsListenSocket | false) => void): UwsApp;
  /** Closes the listen sockets and every open connection (present in every build we load). */
  close?(): UwsApp;
  /** SSLApp only: the certificate for an SNI name (names are matched case-sensitively, `*.` for one label). */
  addServerName?(hostname: string, options: UwsTlsOptions): UwsApp;
  removeServerName?(hostname: string): UwsApp;
  /** SSLApp only: routes registered after this call serve that server name (its own router); '' is the app's own. */
  domain?(serverName: string): UwsApp;
}

/** What SSLApp and addServerName read (files only; a file that does not load crashes uWS 20.30). */
export interface UwsTlsOptions {
  cert_file_name: string;
  key_file_name: string;
  passphrase?: string;
}

export interface UwsModule {
  App(options?: Record<string, unknown>): UwsApp;
  SSLApp(options: UwsTlsOptions): UwsApp;
  us_listen_socket_close(listenSocket: UwsListenSocket): void;
  us_socket_local_port(socket: UwsListenSocket): number;
  /** permessage-deflate settings of a WebSocketBehavior. */
  DISABLED: number;
  SHARED_COMPRESSOR: number;
  /** Absent from some builds; the trufflesuite binary has it. */
  LIBUS_LISTEN_EXCLUSIVE_PORT?: number;
}
