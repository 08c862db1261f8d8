import { CompileRunner } from './compile-runner.js';
import { buildInfo } from '../builtins/build-info.js';
import type { GatewayConfig } from '../config/types.js';
import type { Logger } from '../log.js';
import type { PublishMessage } from './messages.js';
import { HostWeights } from '../proxy/balancer.js';
import type { UpstreamWeight } from '../lifecycle/forward.js';
import type { TemplateProblem } from '../routing/types.js';
import type { UpstreamRegistry } from './discovered-upstreams.js';
import { TemplateProblemLog } from './template-problem-log.js';
import { CacheEpochs } from './cache-epochs.js';

/** What a publish is made from: the config and the upstreams as discovered so far. */
export interface PublishState {
  config: GatewayConfig;
  upstreams: UpstreamRegistry;
}

/** A compiled state, ready to hand to workers. */
export interface Published {
  message: PublishMessage;
  /** Every upstream had finished discovery when this state was taken. */
  complete: boolean;
  /** Endpoints left out of the table because their template was refused. */
  problems: TemplateProblem[];
}

/** What became of a publish: the compiled state that covers it, or why nothing was published. */
export type PublishOutcome = { ok: true; published: Published } | { ok: false; error: string };

/**
 * Turns a PublishState into a versioned table + spec (compiled where compile-runner.ts puts it). Publishes are
 * serialized and coalesced: while one compiles, only the newest requested state is kept for the next.
 */
export class Publisher {
  current: Published | null = null;
  private version = 0;
  private next: PublishState | null = null;
  /** Callers waiting on `next` (or on a state it replaced: the newer one covers theirs). */
  private waiting: Array<(outcome: PublishOutcome) => void> = [];
  private draining: Promise<void> | null = null;
  private readonly runner: CompileRunner;
  /** Refused templates are logged when an upstream's set of them changes, not at every compile. */
  private readonly problemLog: TemplateProblemLog;
  /**
   * The weight ramps (upstreamWeighting), kept here and sent with every publish: a worker started
   * while one is under way (a replacement, a reload that restarts workers) takes it up where the
   * others are. Each worker ramping from its own start went straight to the new weight.
   */
  private weights: HostWeights | null = null;
  private readonly cacheEpochs = new CacheEpochs();

  constructor(
    private readonly log: Logger,
    private readonly onPublished: (published: Published) => void,
    runner = new CompileRunner(),
  ) {
    this.problemLog = new TemplateProblemLog(log);
    this.runner = runner;
  }

  /** Resolves once this state, or a newer one requested meanwhile, was compiled and handed over (or failed). */
  publish(state: PublishState): Promise<PublishOutcome> {
    return new Promise((resolve) => {
      this.next = state;
      this.waiting.push(resolve);
      this.draining ??= this.drain().finally(() => {
        this.draining = null;
      });
    });
  }

  async close(): Promise<void> {
    await this.runner.close();
  }

  private async drain(): Promise<void> {
    while (this.next) {
      const state = this.next;
      const waiting = this.waiting;
      this.next = null;
      this.waiting = [];
      let outcome: PublishOutcome;
      try {
        const published = await this.compile(state);
        this.onPublished(published);
        outcome = { ok: true, published };
      } catch (err) {
        this.log.error({ err }, 'routing table compilation failed; workers keep the previous table');
        outcome = { ok: false, error: `routing table compilation failed: ${err instanceof Error ? err.message : String(err)}` };
      }
      for (const resolve of waiting) resolve(outcome);
    }
  }

  private async compile({ config, upstreams }: PublishState): Promise<Published> {
    const complete = upstreams.allSettled();
    const ready = upstreams.ready();
    const started = performance.now();
    const input = {
      upstreams: ready,
      builtinPaths: config.paths,
      maxUrlBytes: config.limits.maxUrlBytes,
      name: config.name,
      version: buildInfo().version,
      hosted: config.upstreams.map((u) => ({ serviceLocation: u.serviceLocation, ...(u.hosts ? { hosts: u.hosts } : {}) })),
    };
    const compiledOn = this.runner.placeOf(input);
    const output = await this.runner.run(input, compiledOn);
    const tableVersion = ++this.version;

    this.problemLog.report(
      output.problems,
      ready.map((u) => u.upstream.serviceLocation),
      config.upstreams.map((u) => u.serviceLocation),
    );
    if (output.spec === null) this.log.error({ reason: output.specError }, 'combined spec could not be built; /spec keeps the previous one');
    if (output.specRepairs) {
      this.log.info(output.specRepairs, '/spec: what upstreams describe in a way Swagger 2.0 cannot carry is replaced by a plain description');
    }
    upstreams.countEndpoints(output.problems);

    const entries = ready.reduce((n, u) => n + u.entries.length, 0);
    const compileMs = Math.round(performance.now() - started);
    this.log.info({ tableVersion, entries, problems: output.problems.length, complete, compileMs, compiledOn }, 'routing table compiled');
    const spec = output.spec ?? this.current?.message.spec ?? { swagger2: '{}', openapi3: '{}' };
    const published: Published = {
      message: { type: 'publish', tableVersion, config: this.cacheEpochs.stamp(config), table: output.table, spec, upstreams: this.ramped(config, upstreams.weights()), undiscovered: upstreams.undiscovered() },
      complete,
      problems: output.problems,
    };
    this.current = published;
    return published;
  }

  /** `weights` with the ramp each is in (set here first: a changed weight starts one). */
  private ramped(config: GatewayConfig, weights: UpstreamWeight[]): UpstreamWeight[] {
    const settings = config.upstreamWeighting;
    // New settings (every worker restarts with them): ramps under way start over from the weights reached, as a worker's do.
    if (this.weights === null) this.weights = new HostWeights(settings);
    else if (!this.weights.hasSettings(settings)) this.weights = this.weights.rebased(settings);
    const hosts = this.weights;
    const out = weights.map(({ serviceLocation, weight }) => {
      hosts.set(serviceLocation, weight);
      const ramp = hosts.ramp(serviceLocation);
      return ramp === undefined ? { serviceLocation, weight } : { serviceLocation, weight, ramp };
    });
    hosts.retain(new Set(weights.map((w) => w.serviceLocation)));
    return out;
  }
}
