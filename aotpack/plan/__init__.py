"""Stage 2, Recipe -> variants: each kernel x type binding x config x target x specialization class
(``variants``), the classes a kernel's calls will have (``classes``, from the recipe's own expressions on
typical calls: ``typical``), spelt in the states of ``aotpack/states.py``. Imports nothing from the stages
after it."""
