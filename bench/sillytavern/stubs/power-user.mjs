// Stands in for SillyTavern's power-user.js.
export const power_user = {};
