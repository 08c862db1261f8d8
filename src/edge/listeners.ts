/**
 * The data plane's public listeners: the plain port (serving, redirecting to https, or off) and, with
 * `tls`, an SSLApp whose certificate is picked by SNI. Both run the data plane's request handler.
 *
 * Certificates: the first one is the SSLApp's own (clients without SNI or with an unknown name get it);
 * every server name is registered with addServerName. A reload that changes any certificate or name
 * makes a new SSLApp, which joins the port (SO_REUSEPORT) before the old one stops listening; the old
 * one keeps its open connections, their certificates and routers (see setCertificates).
 */
import type { GatewayConfig } from '../config/types.js';
import type { LoadedUws } from '../native/uws.js';
import type { UwsApp, UwsHandler, UwsListenSocket, UwsTlsOptions, UwsWebSocketBehavior } from '../native/uws-types.js';
import type { ListenerCertificateConfig, ListenerTlsConfig } from './types.js';
import { withTextFiles } from './uws-files.js';

export interface EdgeHandlers {
  /** A request that arrived on the plain port. */
  plain: UwsHandler;
  /** A request on the plain port with `plainPort: "redirect"`: answered 308 to https but for the built-ins. */
  plainRedirect: UwsHandler;
  /** A request that arrived over TLS. */
  tls: UwsHandler;
  /** WebSocket upgrades on the plain port: registered before the request handler. */
  ws?: UwsWebSocketBehavior<never>;
  /** WebSocket upgrades over TLS: registered before the request handler on every router of the TLS app. */
  wss?: UwsWebSocketBehavior<never>;
}

/** Called with a certificate problem a worker met (the primary has checked the files, so it is rare). */
export type EdgeWarn = (message: string) => void;

export class EdgeListeners {
  /** The plain port, or the TLS port when the plain one is off. */
  port = 0;
  tlsPort = 0;

  private readonly uws: LoadedUws;
  private readonly config: GatewayConfig;
  private readonly handlers: EdgeHandlers;
  private readonly warn: EdgeWarn;
  private plainApp: UwsApp | null = null;
  private plainSocket: UwsListenSocket | null = null;
  private tls: TlsListener | null = null;

  constructor(uws: LoadedUws, config: GatewayConfig, handlers: EdgeHandlers, warn: EdgeWarn = (m) => process.emitWarning(m, 'EdgeWarning')) {
    this.uws = uws;
    this.config = config;
    this.handlers = handlers;
    this.warn = warn;
    const mode = config.tls?.plainPort ?? 'serve';
    if (mode !== 'off') {
      this.plainApp = uws.uws.App();
      if (mode !== 'redirect' && handlers.ws !== undefined) this.plainApp.ws('/*', handlers.ws);
      this.plainApp.any('/*', mode === 'redirect' ? handlers.plainRedirect : handlers.plain);
    }
  }

  async listen(): Promise<void> {
    const { host, port } = this.config;
    if (this.plainApp !== null) {
      this.plainSocket = await listenOn(this.plainApp, host, port);
      this.port = this.uws.uws.us_socket_local_port(this.plainSocket);
    }
    const tls = this.config.tls;
    if (tls !== undefined) {
      this.tls = new TlsListener(this.uws, host, tls, this.handlers.tls, this.handlers.wss, this.warn);
      this.tlsPort = await this.tls.listen(tls.port);
      if (this.plainApp === null) this.port = this.tlsPort;
    }
  }

  /** A reload's certificates: applied when they differ from the serving ones. */
  setCertificates(tls: ListenerTlsConfig | undefined): void {
    if (tls !== undefined) this.tls?.setCertificates(tls.certificates);
  }

  /** Stops accepting connections; open ones stay. */
  stopListening(): void {
    if (this.plainSocket !== null) this.uws.uws.us_listen_socket_close(this.plainSocket);
    this.plainSocket = null;
    this.tls?.stopListening();
  }

  /** Closes every connection left. */
  closeAll(): void {
    this.plainApp?.close?.();
    this.tls?.closeAll();
  }

  /** The TLS port a plain-port request is redirected to (the bound one once it listens). */
  get redirectPort(): number {
    return this.tlsPort === 0 ? (this.config.tls?.port ?? 0) : this.tlsPort;
  }
}

function listenOn(app: UwsApp, host: string, port: number): Promise<UwsListenSocket> {
  return new Promise((resolve, reject) => {
    // uWS's default listen options set SO_REUSEPORT on Linux: every worker binds the same port.
    app.listen(host, port, (socket) => {
      if (socket === false) reject(new Error(`could not listen on ${host}:${port} (in use without SO_REUSEPORT, or not an address of this host)`));
      else resolve(socket);
    });
  });
}

/** One certificate as uWS gets it: the checked PEM contents, in files that exist only while uWS reads them. */
class LoadableCertificate {
  readonly config: ListenerCertificateConfig;
  constructor(config: ListenerCertificateConfig) {
    this.config = config;
  }

  /** The certificate chain as checked: its key is the one that matches it, whatever form the key file has. */
  get identity(): string {
    return this.config.cert ?? `${this.config.certFile}|${this.config.keyFile}`;
  }

  /** Runs `use` with options naming files that hold exactly what the primary checked. */
  withOptions<T>(use: (options: UwsTlsOptions) => T): T {
    const { cert, key, passphraseEnv, certFile, keyFile } = this.config;
    if (cert === undefined || key === undefined) {
      // A config built in code, not through the loader: uWS reads the named files.
      return use(this.options(certFile, keyFile, passphraseEnv));
    }
    return withTextFiles([cert, key], ([certPath, keyPath]) => use(this.options(certPath!, keyPath!, passphraseEnv)));
  }

  private options(cert: string, key: string, passphraseEnv: string | undefined): UwsTlsOptions {
    const options: UwsTlsOptions = { cert_file_name: cert, key_file_name: key };
    // An empty passphrase is none: BoringSSL refuses an empty one, and the primary wrote the key unencrypted.
    const passphrase = passphraseEnv === undefined ? undefined : process.env[passphraseEnv];
    if (passphrase !== undefined && passphrase !== '') options.passphrase = passphrase;
    return options;
  }
}

/** How long a replaced TLS listening socket stays open after the new one listens (retireSocket). */
export const RETIRE_MS = 250;

class TlsListener {
  private readonly uws: LoadedUws;
  private readonly host: string;
  private readonly handler: UwsHandler;
  private readonly warn: EdgeWarn;
  private app: UwsApp;
  private socket: UwsListenSocket | null = null;
  private port = 0;
  /** Apps that stopped listening after a new first certificate; their connections finish on them. */
  private readonly retired: UwsApp[] = [];
  /** The replaced app's listening socket until it closes (retireSocket). */
  private retiring: UwsListenSocket | null = null;
  private retireTimer: NodeJS.Timeout | null = null;
  private certificates: LoadableCertificate[];
  /** Names registered with the app. */
  private registered: string[] = [];

  constructor(
    uws: LoadedUws,
    host: string,
    tls: ListenerTlsConfig,
    handler: UwsHandler,
    private readonly ws: UwsWebSocketBehavior<never> | undefined,
    warn: EdgeWarn,
  ) {
    this.uws = uws;
    this.host = host;
    this.handler = handler;
    this.warn = warn;
    this.certificates = tls.certificates.map((c) => new LoadableCertificate(c));
    this.app = this.newApp(this.certificates[0]!);
    this.registerNames();
  }

  async listen(port: number): Promise<number> {
    this.socket = await listenOn(this.app, this.host, port);
    this.port = this.uws.uws.us_socket_local_port(this.socket);
    return this.port;
  }

  setCertificates(configs: readonly ListenerCertificateConfig[]): void {
    const next = configs.map((c) => new LoadableCertificate(c));
    const same = next.length === this.certificates.length && next.every((c, i) => c.identity === this.certificates[i]!.identity && sameNames(c, this.certificates[i]!));
    if (same) return;
    const previous = this.certificates;
    this.certificates = next;
    // Any change makes a new app: uWS 20.30 keeps a pointer to the router of a connection's server
    // name, and removeServerName frees it, so the next request on a connection still open under a
    // name removed (or removed and added again with its new certificate) crashed the worker (SIGSEGV,
    // test/edge/edge-tls-reload.test.ts). The old app keeps serving the connections it has.
    if (this.socket !== null) this.replaceApp(previous);
    else this.reregisterNames();
  }

  stopListening(): void {
    if (this.socket !== null) this.uws.uws.us_listen_socket_close(this.socket);
    this.socket = null;
    this.closeRetiring();
  }

  /**
   * Closes a replaced listening socket RETIRE_MS from now, not at once. Building the new app blocks
   * the worker (a name costs an addServerName, a key read and decrypted: 1.0-1.3 s for 200 names on
   * the 2-core test host), and the connections that arrive meanwhile queue on the old socket, where
   * closing it resets them: 30 of 300 fresh connections at 40 a second. Left open a moment, the old app
   * accepts them (with the old certificates) while the kernel already shares new ones with the new socket.
   */
  private retireSocket(socket: UwsListenSocket): void {
    this.closeRetiring();
    this.retiring = socket;
    this.retireTimer = setTimeout(() => this.closeRetiring(), RETIRE_MS);
    this.retireTimer.unref();
  }

  private closeRetiring(): void {
    if (this.retireTimer !== null) clearTimeout(this.retireTimer);
    this.retireTimer = null;
    if (this.retiring !== null) this.uws.uws.us_listen_socket_close(this.retiring);
    this.retiring = null;
  }

  closeAll(): void {
    this.app.close?.();
    for (const app of this.retired) app.close?.();
    this.retired.length = 0;
  }

  private newApp(first: LoadableCertificate): UwsApp {
    const app = first.withOptions((options) => this.uws.uws.SSLApp(options));
    if (this.ws !== undefined) app.ws('/*', this.ws);
    app.any('/*', this.handler);
    return app;
  }

  /**
   * Every name (exact and "*.", lower case) with its certificate. uWS picks an exact name before a
   * wildcard and lets "*" stand for one label, as TLS clients check a wildcard certificate.
   * Each name has a router of its own in uWS (`domain`), which must get the handler too.
   */
  private registerNames(): void {
    const names = new Set<string>();
    for (const certificate of this.certificates) {
      const own: string[] = [];
      for (const name of certificate.config.serverNames) {
        const lower = name.toLowerCase();
        if (names.has(lower)) continue;
        names.add(lower);
        own.push(lower);
      }
      if (own.length === 0) continue;
      // One set of files for all of a certificate's names, not one per name: 500 names took 0.50-0.63 s
      // of CPU with a file round each and 0.29-0.30 s sharing them (an encrypted key; a plain one
      // 0.29-0.52 against 0.10 s), measured in one process on the 2-core test host, 3 rounds each.
      certificate.withOptions((options) => {
        for (const name of own) {
          try {
            this.app.addServerName!(name, options);
            const router = this.app.domain!(name);
            if (this.ws !== undefined) router.ws('/*', this.ws);
            router.any('/*', this.handler);
          } catch (err) {
            this.warn(`certificate ${certificate.config.certFile} could not be registered for ${name}: ${(err as Error).message}`);
          }
        }
      });
    }
    // Back to the app's own router for anything registered later.
    this.app.domain!('');
    this.registered = [...names];
  }

  /** Before the app listens only (no connection can hold a router removeServerName frees: setCertificates). */
  private reregisterNames(): void {
    for (const name of this.registered) this.app.removeServerName?.(name);
    this.registerNames();
  }

  /** A certificate or name changed: a new app joins the port, then the old one stops listening. */
  private replaceApp(previousCertificates: LoadableCertificate[]): void {
    const previous = this.app;
    const previousNames = this.registered;
    const previousSocket = this.socket;
    this.app = this.newApp(this.certificates[0]!);
    this.registerNames();
    this.app.listen(this.host, this.port, (socket) => {
      if (socket === false) {
        // The previous app goes on as it was: swapping its names in place is what crashed (above).
        this.warn(`the new certificates cannot serve: port ${this.port} could not be shared (SO_REUSEPORT needs a fixed port); the previous ones keep serving`);
        this.app.close?.();
        this.app = previous;
        this.registered = previousNames;
        this.certificates = previousCertificates;
        return;
      }
      this.socket = socket;
      if (previousSocket !== null) this.retireSocket(previousSocket);
      this.retired.push(previous);
    });
  }
}

function sameNames(a: LoadableCertificate, b: LoadableCertificate): boolean {
  const x = a.config.serverNames;
  const y = b.config.serverNames;
  return x.length === y.length && x.every((name, i) => name === y[i]);
}
