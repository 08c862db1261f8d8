import type { RouteTarget } from '../routing/table.js';

export interface WeightingSettings {
  /** Steps a weight change is spread over. */
  stepCount: number;
  /** Duration of one step; the weight changes at each step boundary. */
  stepDurationMs: number;
}

export const DEFAULT_WEIGHTING: Readonly<WeightingSettings> = { stepCount: 100, stepDurationMs: 6000 };

/** A weight change under way: from which weight, since when (epoch ms; every process reads the same clock). */
export interface WeightRamp {
  from: number;
  startedAt: number;
}

interface WeightTransition {
  from: number;
  to: number;
  startedAt: number;
  settled: boolean;
}

/** Effective weight per upstream host, moving step-wise towards the configured weight after a change. */
export class HostWeights {
  private readonly hosts = new Map<string, WeightTransition>();
  private readonly stepCount: number;
  private readonly stepDurationMs: number;

  constructor(settings: WeightingSettings, private readonly now: () => number = Date.now) {
    if (!Number.isInteger(settings.stepCount) || settings.stepCount < 0) {
      throw new RangeError(`upstreamWeighting.stepCount must be an integer >= 0, got ${settings.stepCount}`);
    }
    if (!(settings.stepDurationMs >= 0) || !Number.isFinite(settings.stepDurationMs)) {
      throw new RangeError(`upstreamWeighting.stepDurationMs must be >= 0, got ${settings.stepDurationMs}`);
    }
    this.stepCount = settings.stepCount;
    this.stepDurationMs = settings.stepDurationMs;
  }

  /**
   * Sets the target weight. Setting the weight a transition is already heading to changes nothing, so a
   * config reload that repeats a weight does not restart the ramp. With `ramp` (the primary's, see
   * `ramp()`), the transition is that one, whatever this process saw before: a worker started during a
   * ramp takes it up where the others are, instead of starting at the new weight.
   */
  set(upstream: string, weight: number, ramp?: WeightRamp): void {
    if (!(weight >= 0) || !Number.isFinite(weight)) {
      throw new RangeError(`weight of ${upstream} must be a finite number >= 0, got ${weight}`);
    }
    if (ramp !== undefined) {
      const settled = this.stepCount === 0 || this.stepDurationMs === 0 || ramp.from === weight;
      this.hosts.set(upstream, { from: ramp.from, to: weight, startedAt: ramp.startedAt, settled });
      return;
    }
    const host = this.hosts.get(upstream);
    if (host === undefined) {
      this.hosts.set(upstream, { from: weight, to: weight, startedAt: 0, settled: true });
      return;
    }
    if (host.to === weight) return;
    const current = this.weightOf(upstream);
    host.from = current;
    host.to = weight;
    host.startedAt = this.now();
    host.settled = this.stepCount === 0 || this.stepDurationMs === 0 || current === weight;
  }

  /** The transition the host is in, undefined once it has reached its weight (or for an unknown host). */
  ramp(upstream: string): WeightRamp | undefined {
    const host = this.hosts.get(upstream);
    if (host === undefined) return undefined;
    this.weightOf(upstream);
    return host.settled ? undefined : { from: host.from, startedAt: host.startedAt };
  }

  /** Forgets the host: its weight is 0 at once, and a later set() applies at once like for a new host. */
  remove(upstream: string): void {
    this.hosts.delete(upstream);
  }

  /** Forgets every host not in `upstreams` (remove()). */
  retain(upstreams: ReadonlySet<string>): void {
    for (const upstream of this.hosts.keys()) if (!upstreams.has(upstream)) this.hosts.delete(upstream);
  }

  /** Whether these are the settings this was made with. */
  hasSettings(settings: WeightingSettings): boolean {
    return settings.stepCount === this.stepCount && settings.stepDurationMs === this.stepDurationMs;
  }

  /** A HostWeights with other settings whose hosts start at the weights reached here (ramps under way stop there). */
  rebased(settings: WeightingSettings): HostWeights {
    const next = new HostWeights(settings, this.now);
    for (const upstream of this.hosts.keys()) next.set(upstream, this.weightOf(upstream));
    return next;
  }

  weightOf(upstream: string): number {
    const host = this.hosts.get(upstream);
    if (host === undefined) return 0;
    if (host.settled) return host.to;
    const step = Math.floor((this.now() - host.startedAt) / this.stepDurationMs);
    if (step >= this.stepCount) {
      host.settled = true;
      return host.to;
    }
    // A clock that went backwards keeps the starting weight rather than extrapolating.
    if (step <= 0) return host.from;
    return host.from + ((host.to - host.from) * step) / this.stepCount;
  }
}

/**
 * Smooth weighted round-robin (nginx's algorithm) for one route. State is keyed by upstream, so the
 * targets passed to pick() may be any subset of the route's targets (content negotiation).
 *
 * Availability is asked lazily, best candidate first: `isAvailable(u)` returning true means `u` is the
 * host returned. That lets it be a breaker's canSend(), whose true may reserve a half-open trial.
 * Hosts never asked (ranked below the picked one) are treated as available for the state update; an
 * unavailable host's counter therefore grows only until it ranks first, is asked, and is left out.
 * Cost: O(targets) per pick, times (1 + hosts found unavailable in that pick).
 *
 * `commit: false` (a retry's second host) picks the same way but leaves the rotation as it is: the
 * request already took its turn, and counting it twice would send every first attempt to the same host.
 */
export class RouteBalancer {
  private readonly slotOf = new Map<string, number>();
  private current = new Float64Array(8);
  /** This pick's weight per slot; valid when seenInPick[slot] === pickSerial. */
  private weight = new Float64Array(8);
  /** This pick's slot per target index. */
  private slotAt = new Int32Array(8);
  private seenInPick = new Uint32Array(8);
  private excludedInPick = new Uint32Array(8);
  private pickSerial = 0;
  private lastZeroWeightIndex = -1;

  pick(
    targets: readonly RouteTarget[],
    weights: HostWeights,
    isAvailable: (upstream: string) => boolean,
    commit = true,
  ): RouteTarget | null {
    const serial = this.nextSerial();
    this.loadWeights(targets, weights, serial);
    for (;;) {
      const best = this.bestCandidate(targets, serial);
      if (best < 0) break;
      if (isAvailable(targets[best]!.upstream)) {
        if (commit) this.commit(targets.length, this.slotAt[best]!, serial);
        return targets[best]!;
      }
      this.excludedInPick[this.slotAt[best]!] = serial;
    }
    return this.pickZeroWeight(targets, serial, isAvailable);
  }

  private nextSerial(): number {
    // Wrap well before 2^31 so the serial stays a small integer; clear the marks so stale ones cannot match.
    if (++this.pickSerial === 0x40000000) {
      this.seenInPick.fill(0);
      this.excludedInPick.fill(0);
      this.pickSerial = 1;
    }
    return this.pickSerial;
  }

  private loadWeights(targets: readonly RouteTarget[], weights: HostWeights, serial: number): void {
    if (targets.length > this.slotAt.length) this.slotAt = new Int32Array(Math.max(targets.length, this.slotAt.length * 2));
    for (let i = 0; i < targets.length; i++) {
      const upstream = targets[i]!.upstream;
      const slot = this.slotFor(upstream);
      this.slotAt[i] = slot;
      if (this.seenInPick[slot] === serial) continue;
      this.seenInPick[slot] = serial;
      this.weight[slot] = weights.weightOf(upstream);
    }
  }

  /** Index in targets of the host with the highest current + weight among weight > 0, not excluded; -1 if none. */
  private bestCandidate(targets: readonly RouteTarget[], serial: number): number {
    let best = -1;
    let bestValue = 0;
    for (let i = 0; i < targets.length; i++) {
      const slot = this.slotAt[i]!;
      const w = this.weight[slot]!;
      if (w <= 0 || this.excludedInPick[slot] === serial) continue;
      const value = this.current[slot]! + w;
      if (best < 0 || value > bestValue) {
        best = i;
        bestValue = value;
      }
    }
    return best;
  }

  private commit(targetCount: number, pickedSlot: number, serial: number): void {
    let total = 0;
    for (let i = 0; i < targetCount; i++) {
      const slot = this.slotAt[i]!;
      const w = this.weight[slot]!;
      // seenInPick doubles as "not yet counted" so a host listed twice is counted once.
      if (w <= 0 || this.excludedInPick[slot] === serial || this.seenInPick[slot] !== serial) continue;
      this.seenInPick[slot] = 0;
      this.current[slot]! += w;
      total += w;
    }
    this.current[pickedSlot]! -= total;
  }

  /** Plain round-robin over the available weight-0 hosts, used only when no weighted host can serve. */
  private pickZeroWeight(
    targets: readonly RouteTarget[],
    serial: number,
    isAvailable: (upstream: string) => boolean,
  ): RouteTarget | null {
    const n = targets.length;
    for (let k = 1; k <= n; k++) {
      const i = (this.lastZeroWeightIndex + k) % n;
      const upstream = targets[i]!.upstream;
      const slot = this.slotAt[i]!;
      if (this.weight[slot]! > 0 || this.excludedInPick[slot] === serial) continue;
      this.excludedInPick[slot] = serial; // ask each host once, even if listed twice
      if (isAvailable(upstream)) {
        this.lastZeroWeightIndex = i;
        return targets[i]!;
      }
    }
    return null;
  }

  private slotFor(upstream: string): number {
    let slot = this.slotOf.get(upstream);
    if (slot === undefined) {
      slot = this.slotOf.size;
      this.slotOf.set(upstream, slot);
      if (slot >= this.current.length) this.grow(slot + 1);
    }
    return slot;
  }

  private grow(minimum: number): void {
    const size = Math.max(minimum, this.current.length * 2);
    const current = new Float64Array(size);
    current.set(this.current);
    this.current = current;
    const weight = new Float64Array(size);
    weight.set(this.weight);
    this.weight = weight;
    const seen = new Uint32Array(size);
    seen.set(this.seenInPick);
    this.seenInPick = seen;
    const excluded = new Uint32Array(size);
    excluded.set(this.excludedInPick);
    this.excludedInPick = excluded;
  }
}
