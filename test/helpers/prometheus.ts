// Test support: a strict parser of the Prometheus text exposition format (0.0.4).

export interface PromSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}
export interface PromFamily {
  type: string;
  help: string;
  samples: PromSample[];
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

function parseValue(text: string): number {
  if (text === 'NaN') return NaN;
  if (text === '+Inf') return Infinity;
  if (text === '-Inf') return -Infinity;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text)) throw new Error(`bad value ${JSON.stringify(text)}`);
  return Number(text);
}

function parseLabels(text: string, line: string): [Record<string, string>, number] {
  // text starts right after '{'; returns labels and the index after '}'.
  const labels: Record<string, string> = {};
  let i = 0;
  while (text[i] !== '}') {
    const eq = text.indexOf('=', i);
    const name = text.slice(i, eq);
    if (!LABEL_NAME.test(name) || text[eq + 1] !== '"') throw new Error(`bad label in ${line}`);
    let value = '';
    let j = eq + 2;
    for (; text[j] !== '"'; j++) {
      if (j >= text.length) throw new Error(`unterminated label value in ${line}`);
      if (text[j] === '\\') {
        const next = text[++j];
        if (next === 'n') value += '\n';
        else if (next === '\\' || next === '"') value += next;
        else throw new Error(`bad escape \\${next} in ${line}`);
      } else if (text[j] === '\n') {
        throw new Error('raw newline in label value');
      } else value += text[j];
    }
    if (name in labels) throw new Error(`duplicate label ${name} in ${line}`);
    labels[name] = value;
    i = j + 1;
    if (text[i] === ',') i++;
    else if (text[i] !== '}') throw new Error(`expected , or } in ${line}`);
  }
  return [labels, i + 1];
}

export function parsePrometheus(text: string): Map<string, PromFamily> {
  if (!text.endsWith('\n')) throw new Error('exposition must end with a newline');
  const families = new Map<string, PromFamily>();
  let current: string | null = null;
  const finished = new Set<string>();
  for (const line of text.slice(0, -1).split('\n')) {
    const help = /^# HELP (\S+) (.*)$/.exec(line);
    const type = /^# TYPE (\S+) (counter|gauge|summary|histogram|untyped)$/.exec(line);
    if (help) {
      if (!METRIC_NAME.test(help[1]!) || families.has(help[1]!)) throw new Error(`bad or repeated HELP: ${line}`);
      if (current !== null) finished.add(current);
      current = help[1]!;
      families.set(current, { type: '', help: help[2]!, samples: [] });
      continue;
    }
    if (type) {
      const family = families.get(type[1]!);
      if (!family || current !== type[1] || family.type !== '' || family.samples.length > 0) throw new Error(`TYPE out of place: ${line}`);
      family.type = type[2]!;
      continue;
    }
    if (line.startsWith('#') || line === '') throw new Error(`unexpected line ${JSON.stringify(line)}`);
    const nameEnd = line.search(/[{ ]/);
    const name = line.slice(0, nameEnd);
    if (!METRIC_NAME.test(name)) throw new Error(`bad metric name in ${line}`);
    let labels: Record<string, string> = {};
    let rest = line.slice(nameEnd);
    if (rest.startsWith('{')) {
      const [parsed, end] = parseLabels(rest.slice(1), line);
      labels = parsed;
      rest = rest.slice(1 + end);
    }
    if (!rest.startsWith(' ')) throw new Error(`expected space before value in ${line}`);
    const value = parseValue(rest.slice(1));
    const familyName = families.has(name) ? name : name.replace(/_(sum|count|bucket)$/, '');
    const family = families.get(familyName);
    if (!family || family.type === '') throw new Error(`sample without HELP/TYPE: ${line}`);
    if (familyName !== current || finished.has(familyName)) throw new Error(`family ${familyName} not contiguous`);
    if (family.type === 'histogram') {
      if (name === familyName) throw new Error(`histogram sample without a suffix: ${line}`);
      if (name.endsWith('_bucket') !== 'le' in labels) throw new Error(`le belongs on _bucket samples only: ${line}`);
    } else if (family.type !== 'summary' && familyName !== name) throw new Error(`${name} in a ${family.type}`);
    else if (name.endsWith('_bucket')) throw new Error(`_bucket in a ${family.type}: ${line}`);
    if (family.type === 'summary' && name === familyName && !('quantile' in labels)) throw new Error(`summary sample without quantile: ${line}`);
    if (family.type === 'counter' && !name.endsWith('_total')) throw new Error(`counter ${name} without _total`);
    family.samples.push({ name, labels, value });
  }
  return families;
}

export function sampleValue(families: Map<string, PromFamily>, family: string, name: string, labels: Record<string, string>): number | undefined {
  const match = families.get(family)?.samples.filter(
    (s) => s.name === name && Object.keys(labels).length === Object.keys(s.labels).length && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  );
  if (match && match.length > 1) throw new Error(`duplicate sample ${name} ${JSON.stringify(labels)}`);
  return match?.[0]?.value;
}
