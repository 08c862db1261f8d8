/*
 * Circuit breakers per upstream host and per host + route.
 *
 * Failures count consecutively: any success resets the count. A host that fails 50 of its last 1000
 * requests spread out is degraded, not down; tripping on an unbroken run of failures catches hosts that
 * are actually down without any windowing state on the hot path.
 *
 * States: closed -> (threshold consecutive failures) -> open -> (resetMs elapsed) -> one trial request
 * (half-open) -> success closes / failure re-opens for another resetMs.
 *
 * Outcomes that arrive while a breaker is open come from requests sent before it opened: they are
 * counted but change no state, so only the trial decides. A trial that never reports back (aborted
 * request, lost callback) is given up after resetMs and another trial is let through.
 */

export interface BreakerSettings {
  /** Consecutive failures that open a host's breaker. */
  hostFailures: number;
  /** Consecutive failures that open a host + route breaker. */
  endpointFailures: number;
  /** How long an open breaker stays open before it lets one trial request through. */
  resetMs: number;
}

export const DEFAULT_BREAKER_SETTINGS: Readonly<BreakerSettings> = {
  hostFailures: 50,
  endpointFailures: 25,
  resetMs: 10_000,
};

export type BreakerStateName = 'closed' | 'open' | 'half-open';

export interface BreakerSnapshot {
  upstream: string;
  /** null for the host's own breaker. */
  routeId: number | null;
  state: BreakerStateName;
  failures: number;
}

const CLOSED = 0;
const OPEN = 1;
const HALF_OPEN = 2;

class Circuit {
  failures = 0;
  state = CLOSED;
  /** When it opened (OPEN) or when the trial was let through (HALF_OPEN). */
  since = 0;

  /** Whether a request may go now; for an open breaker, whether its trial may go. */
  permits(now: number, resetMs: number): boolean {
    return this.state === CLOSED || now - this.since >= resetMs;
  }

  /** Call only after permits() said yes. */
  sent(now: number): void {
    if (this.state === CLOSED) return;
    this.state = HALF_OPEN;
    this.since = now;
  }

  succeeded(): void {
    if (this.state === OPEN) return;
    this.failures = 0;
    this.state = CLOSED;
  }

  failed(now: number, threshold: number): void {
    this.failures++;
    if (this.state === HALF_OPEN || (this.state === CLOSED && this.failures >= threshold)) {
      this.state = OPEN;
      this.since = now;
    }
  }

  stateName(now: number, resetMs: number): BreakerStateName {
    if (this.state === CLOSED) return 'closed';
    // An open breaker whose resetMs has passed lets the next request through as its trial.
    if (this.state === HALF_OPEN || now - this.since >= resetMs) return 'half-open';
    return 'open';
  }
}

class HostCircuit extends Circuit {
  readonly endpoints = new Map<number, Circuit>();
}

/** One circuit as shipped to the primary (see src/cluster/breaker-hub.ts). */
export interface CircuitReport {
  upstream: string;
  /** "METHOD template" of a host+endpoint breaker; null for the host's own. */
  endpoint: string | null;
  state: BreakerStateName;
  failures: number;
  /** Epoch ms when it opened (or let its trial through); 0 while closed. */
  since: number;
}

export class Breakers {
  /** Only hosts that have failed at least once are tracked; the others are closed by definition. */
  private readonly hosts = new Map<string, HostCircuit>();
  /** The hosts the serving table and config name (forgetRoutes); null until the first table. */
  private liveHosts: ReadonlySet<string> | null = null;
  private readonly hostFailures: number;
  private readonly endpointFailures: number;
  private readonly resetMs: number;

  /**
   * @param onChange called after any change a report would show (a failure, a success that reset a
   *   count, a trip); never for successes of hosts that have no failures (the hot path).
   */
  constructor(
    settings: BreakerSettings,
    private readonly now: () => number = Date.now,
    private readonly onChange: (() => void) | null = null,
  ) {
    for (const key of ['hostFailures', 'endpointFailures'] as const) {
      if (!Number.isInteger(settings[key]) || settings[key] < 1) {
        throw new RangeError(`circuitBreaker.${key} must be an integer >= 1, got ${settings[key]}`);
      }
    }
    if (!(settings.resetMs >= 0) || !Number.isFinite(settings.resetMs)) {
      throw new RangeError(`circuitBreaker.resetMs must be >= 0, got ${settings.resetMs}`);
    }
    this.hostFailures = settings.hostFailures;
    this.endpointFailures = settings.endpointFailures;
    this.resetMs = settings.resetMs;
  }

  /**
   * Whether a request to this host for this route may be sent. A true answer for an open breaker whose
   * resetMs has passed is that breaker's trial: the caller must send the request and report its outcome.
   */
  canSend(upstream: string, routeId: number): boolean {
    const host = this.hosts.get(upstream);
    if (host === undefined) return true;
    const endpoint = host.endpoints.get(routeId);
    const hostClosed = host.state === CLOSED;
    const endpointClosed = endpoint === undefined || endpoint.state === CLOSED;
    if (hostClosed && endpointClosed) return true;
    const now = this.now();
    if (!host.permits(now, this.resetMs)) return false;
    if (endpoint !== undefined && !endpoint.permits(now, this.resetMs)) return false;
    host.sent(now);
    endpoint?.sent(now);
    return true;
  }

  onSuccess(upstream: string, routeId: number): void {
    const host = this.hosts.get(upstream);
    if (host === undefined) return;
    const endpoint = host.endpoints.get(routeId);
    const wasClean = host.failures === 0 && host.state === CLOSED && (endpoint === undefined || (endpoint.failures === 0 && endpoint.state === CLOSED));
    host.succeeded();
    endpoint?.succeeded();
    if (!wasClean) this.onChange?.();
  }

  /** A 5xx, a timeout or a connection error. */
  onFailure(upstream: string, routeId: number): void {
    let host = this.hosts.get(upstream);
    if (host === undefined) {
      if (this.liveHosts !== null && !this.liveHosts.has(upstream)) return;
      host = new HostCircuit();
      this.hosts.set(upstream, host);
    }
    let endpoint = host.endpoints.get(routeId);
    if (endpoint === undefined) {
      endpoint = new Circuit();
      host.endpoints.set(routeId, endpoint);
    }
    const now = this.now();
    host.failed(now, this.hostFailures);
    endpoint.failed(now, this.endpointFailures);
    this.onChange?.();
  }

  /**
   * Opens a closed breaker now: the primary counted enough failures across all workers (a worker's own
   * count alone would trip N times late). Open and half-open breakers are left as they are.
   */
  trip(upstream: string, routeId: number | null): void {
    let host = this.hosts.get(upstream);
    if (host === undefined) {
      if (this.liveHosts !== null && !this.liveHosts.has(upstream)) return;
      host = new HostCircuit();
      this.hosts.set(upstream, host);
    }
    let circuit: Circuit = host;
    if (routeId !== null) {
      let endpoint = host.endpoints.get(routeId);
      if (endpoint === undefined) host.endpoints.set(routeId, (endpoint = new Circuit()));
      circuit = endpoint;
    }
    if (circuit.state !== CLOSED) return;
    circuit.state = OPEN;
    circuit.since = this.now();
    this.onChange?.();
  }

  /** Every tracked circuit for the primary, endpoints named by `endpointKey(routeId)`. */
  report(endpointKey: (routeId: number) => string | null): CircuitReport[] {
    const now = this.now();
    const out: CircuitReport[] = [];
    const entry = (upstream: string, endpoint: string | null, circuit: Circuit): CircuitReport => ({
      upstream,
      endpoint,
      state: circuit.stateName(now, this.resetMs),
      failures: circuit.failures,
      since: circuit.state === CLOSED ? 0 : circuit.since,
    });
    for (const [upstream, host] of this.hosts) {
      out.push(entry(upstream, null, host));
      for (const [routeId, endpoint] of host.endpoints) {
        const key = endpointKey(routeId);
        if (key !== null) out.push(entry(upstream, key, endpoint));
      }
    }
    return out;
  }

  /**
   * Route ids are only stable within one compiled routing table: call when a new table is swapped in,
   * with the hosts it and the config name. Every host + route circuit starts over; a host no longer
   * named is dropped, and from now on a late outcome or trip for it (a request sent before the swap)
   * tracks nothing. The next report shows all of that (onChange when anything went).
   */
  forgetRoutes(liveHosts: ReadonlySet<string>): void {
    this.liveHosts = liveHosts;
    let changed = false;
    for (const [upstream, host] of this.hosts) {
      if (!liveHosts.has(upstream)) {
        this.hosts.delete(upstream);
        changed = true;
      } else if (host.endpoints.size > 0) {
        host.endpoints.clear();
        changed = true;
      }
    }
    if (changed) this.onChange?.();
  }

  /** Every tracked breaker (hosts and host + routes that have failed at least once), for /metrics. */
  snapshot(): BreakerSnapshot[] {
    const now = this.now();
    const out: BreakerSnapshot[] = [];
    for (const [upstream, host] of this.hosts) {
      out.push({ upstream, routeId: null, state: host.stateName(now, this.resetMs), failures: host.failures });
      for (const [routeId, endpoint] of host.endpoints) {
        out.push({ upstream, routeId, state: endpoint.stateName(now, this.resetMs), failures: endpoint.failures });
      }
    }
    return out;
  }
}
