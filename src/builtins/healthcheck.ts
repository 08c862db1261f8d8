import type { CertificateHealth } from '../edge/certificate-report.js';
import { hostname } from 'node:os';
import type { ServiceType } from '../config/types.js';
import type { EndpointProblem } from '../discovery/types.js';
import { buildInfo, type BuildInfo } from './build-info.js';
import type { StoreHealth } from '../cluster/store-states.js';

export type UpstreamState = 'pending' | 'ready' | 'failed';

export interface UpstreamHealth {
  serviceType: ServiceType;
  serviceLocation: string;
  weight: number;
  state: UpstreamState;
  /** Endpoints this upstream contributes to the routing table. */
  endpoints: number;
  lastError?: string;
  /** Endpoints the router left out, then what a validator objects to in the doc: the first ones (see problemsOmitted). */
  problems?: EndpointProblem[];
  /** How many problems there are beyond those `problems` lists. */
  problemsOmitted?: number;
}

/** The outcome of the last config reload (SIGHUP). */
export interface ReloadStatus {
  /** Table version serving once the reload was done with (unchanged when it was refused). */
  version: number | null;
  /** When it finished, ISO 8601. */
  at: string;
  /** Applied with no problem. */
  ok: boolean;
  /** The new config serves; false when it was refused and the previous one keeps serving. */
  applied: boolean;
  /** Why it was refused, or what of an applied config could not be used (e.g. rejected templates). */
  error?: string;
  /** Settings the reload changed that apply on restart only. */
  warnings?: string[];
}

/** One worker slot: its process, and the table version it reported serving with (null: not serving yet). */
export interface WorkerSlotHealth {
  slot: number;
  /** Null while the slot has no process (its worker died and the replacement is not started yet). */
  pid: number | null;
  tableVersion: number | null;
}

/** How many workers serve, and with which table: a missing worker or one stuck on an old table shows here. */
export interface WorkersHealth {
  /** Worker slots the gateway runs (`workers`). */
  expected: number;
  /** Slots whose worker serves, with any table. */
  serving: number;
  /** The newest published table version (null before the first); each slot should report it. */
  tableVersion: number | null;
  slots: WorkerSlotHealth[];
}

export interface ComponentStates {
  pending: string[];
  ready: string[];
  /** Listeners only, present when some are: initialized, and not working now (the access log cannot write). */
  failing?: string[];
}

/** docs/reference/builtins.md#healthcheck: every field, with its type; fields are added, never removed or retyped. */
export interface HealthReport {
  listeners: ComponentStates;
  middleware: ComponentStates;
  upstreams: UpstreamHealth[];
  buildInfo: BuildInfo;
  host: string;
  /** An extra field: the worker processes. */
  workers?: WorkersHealth;
  /** An extra field: present once a reload happened. */
  reload?: ReloadStatus;
  /** An extra field (docs/reference/stores.md#when-a-store-fails): the stores middleware use, with their state; present when middleware is configured. */
  kvStores?: Record<string, StoreHealth>;
  /** The TLS listener's certificates (present with `tls`). */
  tls?: { certificates: CertificateHealth[] };
}

export interface HealthInput {
  listeners: ComponentStates;
  middleware: ComponentStates;
  upstreams: readonly UpstreamHealth[];
  reload?: ReloadStatus | null;
  workers?: WorkersHealth;
  kvStores?: Record<string, StoreHealth>;
  tlsCertificates?: CertificateHealth[];
}

export function healthReport(input: HealthInput): HealthReport {
  const report: HealthReport = {
    listeners: { pending: [...input.listeners.pending], ready: [...input.listeners.ready], ...(input.listeners.failing ? { failing: [...input.listeners.failing] } : {}) },
    middleware: { pending: [...input.middleware.pending], ready: [...input.middleware.ready] },
    upstreams: input.upstreams.map((u) => {
      const entry: UpstreamHealth = {
        serviceType: u.serviceType,
        serviceLocation: u.serviceLocation,
        weight: u.weight,
        state: u.state,
        endpoints: u.endpoints,
      };
      if (u.lastError !== undefined) entry.lastError = u.lastError;
      if (u.problems !== undefined) entry.problems = u.problems.map((p) => ({ ...p }));
      if (u.problemsOmitted !== undefined) entry.problemsOmitted = u.problemsOmitted;
      return entry;
    }),
    buildInfo: buildInfo(),
    host: hostname(),
  };
  if (input.workers) report.workers = { ...input.workers, slots: input.workers.slots.map((slot) => ({ ...slot })) };
  if (input.reload) report.reload = { ...input.reload };
  if (input.kvStores) report.kvStores = Object.fromEntries(Object.entries(input.kvStores).map(([name, store]) => [name, { ...store }]));
  if (input.tlsCertificates) report.tls = { certificates: input.tlsCertificates.map((c) => ({ ...c, serverNames: [...c.serverNames] })) };
  return report;
}
