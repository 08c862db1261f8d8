// Imported first by the worker entry (./worker.ts), so that its first statement holds the signals (./held-signals.ts).
import { holdSignals } from './held-signals.js';

holdSignals();
