"""MineDojo's ``minedojo.sim.mc_meta.mc`` as far as the adapter reads it: the craft/smelt vocabulary."""

ALL_CRAFT_SMELT_ITEMS = [
    "acacia_boat", "crafting_table", "planks", "stick", "torch", "furnace", "iron_pickaxe", "stone_pickaxe",
    "wooden_pickaxe", "cooked_beef", "iron_ingot",
]
