#!/usr/bin/env -S node --max-semi-space-size=64
// The `tollgate` command of the installed package. The sources are TypeScript, run in place by tsx
// (a dependency). The larger young generation (the flag above, which only the command line can
// set) lets the short-lived objects of a request die young: fewer, cheaper garbage collections.
import { register } from 'tsx/esm/api';

register();
await import('../src/cli.ts');
