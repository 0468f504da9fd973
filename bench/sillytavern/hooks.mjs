// Module hooks for the World Info harness: SillyTavern's world-info.js is loaded as an ES module,
// and every module it imports is answered by one of our stubs in ./stubs instead.
import { readFile } from 'node:fs/promises';

const STUBS = new URL('./stubs/', import.meta.url);
// The module world-info.js imports (by file name) -> our stub. Anything else gets inert.mjs.
const STUB_FOR = {
    'script.js': 'script.mjs',
    'utils.js': 'utils.mjs',
    'extensions.js': 'extensions.mjs',
    'tokenizers.js': 'tokenizers.mjs',
    'tags.js': 'tags.mjs',
    'power-user.js': 'power-user.mjs',
    'StructuredCloneMap.js': 'collections.mjs',
};

let worldInfoUrl = null;

export async function initialize(data) {
    worldInfoUrl = data.worldInfoUrl;
}

export async function resolve(specifier, context, nextResolve) {
    if (context.parentURL === worldInfoUrl && (specifier.startsWith('./') || specifier.startsWith('../'))) {
        const name = new URL(specifier, context.parentURL).pathname.split('/').pop();
        return { url: new URL(STUB_FOR[name] ?? 'inert.mjs', STUBS).href, shortCircuit: true };
    }
    return nextResolve(specifier, context);
}

export async function load(url, context, nextLoad) {
    if (url === worldInfoUrl) {
        // SillyTavern's package.json says "commonjs"; its browser scripts are ES modules all the same.
        const source = await readFile(new URL(url), 'utf8');
        return { format: 'module', source, shortCircuit: true };
    }
    return nextLoad(url, context);
}
