/** What an upstream declares about one operation, beyond its method and template. */
export interface EndpointDetails {
  /** Media types the endpoint accepts as request bodies; empty means anything. */
  readonly consumes: readonly string[];
  /** Media types the endpoint can answer with; empty means anything. */
  readonly produces: readonly string[];
  /** `x-disabled-middleware` ids. */
  readonly disabledMiddleware: readonly string[];
  /** `x-disabled-listeners` ids (e.g. "accessLog"). */
  readonly disabledListeners: readonly string[];
}

/** One declared endpoint of one upstream: the unit the routing table is compiled from. */
export interface RouteEntry extends EndpointDetails {
  /** Upper-case HTTP method. */
  readonly method: string;
  /** Path template with any basePath / server path already prefixed. */
  readonly template: string;
  /** The upstream's key: its `serviceLocation` (e.g. `http://127.0.0.1:8081`). */
  readonly upstream: string;
}

/** A template that could not be compiled; the rest of its upstream still loads. */
export interface TemplateProblem {
  readonly upstream: string;
  readonly method: string;
  readonly template: string;
  /** Why, with what it quotes of the template escaped (printable). */
  readonly reason: string;
  /** Human-readable, names the upstream and the template; printable (src/text/printable.ts). */
  readonly message: string;
}

/** One endpoint inside an equivalence group: which upstream serves it and what it declared. */
export interface RouteTarget extends EndpointDetails {
  readonly upstream: string;
  /** The template as this upstream wrote it. */
  readonly template: string;
}
