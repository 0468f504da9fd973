// Stands in for SillyTavern's util/StructuredCloneMap.js: a Map that hands out copies.
export class StructuredCloneMap extends Map {
    constructor() {
        super();
    }

    get(key) {
        const value = super.get(key);
        return value === undefined ? undefined : structuredClone(value);
    }
}
