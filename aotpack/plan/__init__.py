"""Stage 2, Recipe -> variants: each kernel x type binding x config x target x specialization class
(``variants``), the classes a kernel's calls will have (``classes``, from the recipe's own expressions on
typical calls: ``typical``), and the states a class gives each argument (``states``). Imports nothing from
the stages after it (model.py imports ``states``: keep this file free of imports)."""
