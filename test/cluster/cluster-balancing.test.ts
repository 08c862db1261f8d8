// Weighted balancing through the real gateway: one worker, three upstreams declaring the same endpoint.
import t from 'tap';
import { httpRequest, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';

const light1 = await startUpstream(t, { name: 'light-1' });
const light2 = await startUpstream(t, { name: 'light-2' });
const heavy = await startUpstream(t, { name: 'heavy' });
const endpoints = [{ method: 'GET', path: '/items/{id}' }];

const gateway = await startGateway(t, {
  workers: 1,
  config: testConfig([
    { serviceType: 'static', serviceLocation: light1.location, weight: 1, endpoints },
    { serviceType: 'static', serviceLocation: light2.location, weight: 1, endpoints },
    { serviceType: 'static', serviceLocation: heavy.location, weight: 2, endpoints },
  ]),
  waitFor: (line) => line.msg === 'gateway operational',
});

t.test('hosts weighted 1, 1, 2 share 400 requests 100/100/200', async (t) => {
  const answered = new Map<string, number>();
  for (let i = 0; i < 400; i++) {
    const res = await httpRequest(gateway.port, `/items/${i}`);
    t.equal(res.status, 200);
    const upstream = (JSON.parse(res.body) as { upstream: string }).upstream;
    answered.set(upstream, (answered.get(upstream) ?? 0) + 1);
  }
  t.same(Object.fromEntries(answered), { 'light-1': 100, 'light-2': 100, heavy: 200 });
  t.equal(light1.total(), 100, 'what each upstream saw agrees');
  t.equal(heavy.total(), 200);
});
