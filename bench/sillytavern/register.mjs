// Register hooks.mjs before harness.mjs runs: world-info.js at ST_WORLD_INFO_URL, stubbed imports.
import { register } from 'node:module';

register('./hooks.mjs', import.meta.url, { data: { worldInfoUrl: process.env.ST_WORLD_INFO_URL } });
