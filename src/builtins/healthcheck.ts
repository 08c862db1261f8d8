import { hostname } from 'node:os';
import type { ServiceType } from '../config/types.js';
import { buildInfo, type BuildInfo } from './build-info.js';

export type UpstreamState = 'pending' | 'ready' | 'failed';

export interface UpstreamHealth {
  serviceType: ServiceType;
  serviceLocation: string;
  weight: number;
  state: UpstreamState;
  /** Endpoints this upstream contributes to the routing table. */
  endpoints: number;
  lastError?: string;
}

export interface ComponentStates {
  pending: string[];
  ready: string[];
}

/** Contract section 5: every field of the source document, with its type. */
export interface HealthReport {
  listeners: ComponentStates;
  middleware: ComponentStates;
  upstreams: UpstreamHealth[];
  buildInfo: BuildInfo;
  host: string;
}

export interface HealthInput {
  listeners: ComponentStates;
  middleware: ComponentStates;
  upstreams: readonly UpstreamHealth[];
}

export function healthReport(input: HealthInput): HealthReport {
  return {
    listeners: { pending: [...input.listeners.pending], ready: [...input.listeners.ready] },
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
      return entry;
    }),
    buildInfo: buildInfo(),
    host: hostname(),
  };
}
